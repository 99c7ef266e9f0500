"""InjectDoubleBuffer: doubled allocation, prologue, parity switch, split loops."""

import numpy as np
import pytest

import loom
from loom.errors import LoomValueError
from loom.ir import Allocate, AttrStmt, BufferStore, For, IfThenElse, PrimFunc, collect, seq
from loom.testing import evaluate
from loom.testing.random_programs import random_func
from loom.transform import PassContext
from loom.transform.double_buffer import InjectDoubleBuffer, inject_double_buffer

A = loom.decl_buffer((32,), "float32", name="A")
C = loom.decl_buffer((32,), "float32", name="C")


def pipeline(extent, *params):
    """Iteration i stages A[2i:2i+2] in a shared buffer, then mixes it into C."""
    B = loom.decl_buffer((2,), "float32", name="B", scope="shared")
    i, j, k = loom.var("i"), loom.var("j"), loom.var("k")
    produce = For(j, 0, 2, "serial", BufferStore(B, A[i * 2 + j] + 1.0, [j]))
    consume = For(k, 0, 2, "serial", BufferStore(C, B[1 - k] * 2.0 + B[k], [i * 2 + k]))
    body = Allocate(B.data, "float32", [2], True, seq(AttrStmt(B.data, "double_buffer_scope", 1, produce), consume),
                    "shared")
    return PrimFunc([A.data, C.data, *params], For(i, 0, extent, "serial", body), buffer_map={A.data: A, C.data: C})


def run(f, *scalars):
    a = np.arange(32, dtype="float32") * 0.5
    c = np.zeros(32, dtype="float32")
    evaluate(f, a, c, *scalars)
    return c


def test_structure_without_split():
    B = loom.decl_buffer((1,), "float32", name="B", scope="shared")
    i = loom.var("i")
    body = Allocate(B.data, "float32", [1], True, seq(
        AttrStmt(B.data, "double_buffer_scope", 1, BufferStore(B, A[i], [0])), BufferStore(C, B[0], [i])), "shared")
    after = inject_double_buffer(For(i, 0, 4, "serial", body), split_loop=0)
    B2 = loom.decl_buffer((2, 1), "float32", name="B", data=B.data, scope="shared")
    expected = Allocate(B.data, "float32", [2, 1], True, seq(
        BufferStore(B2, A[0], [0, 0]),
        For(i, 0, 4, "serial", seq(
            IfThenElse(i + 1 < 4, BufferStore(B2, A[i + 1], [loom.floormod(i + 1, 2), 0])),
            BufferStore(C, B2[loom.floormod(i, 2), 0], [i])))), "shared")
    loom.assert_structural_equal(after, expected)


@pytest.mark.parametrize("split", [0, 1, 2, 4])
@pytest.mark.parametrize("extent", [1, 2, 7, 8, 16])
def test_result_unchanged(split, extent):
    f = pipeline(extent)
    with PassContext(config={"tir.double_buffer_split_loop": split}):
        after = InjectDoubleBuffer()(f)
    loom.verify_well_formed(after)
    assert not collect(after.body, lambda x: isinstance(x, AttrStmt))
    np.testing.assert_array_equal(run(after), run(f))


@pytest.mark.parametrize("n", [0, 1, 5, 16])
def test_symbolic_extent(n):
    m = loom.var("m")
    f = pipeline(m, m)
    after = InjectDoubleBuffer()(f)
    np.testing.assert_array_equal(run(after, n), run(f, n))


def test_split_option_removes_the_switch_condition():
    f = pipeline(8)
    with PassContext(config={"tir.double_buffer_split_loop": 0}):
        plain = InjectDoubleBuffer()(f)
    with PassContext(config={"tir.double_buffer_split_loop": 2}):
        split = InjectDoubleBuffer()(f)
    plain_loop = next(x for x in collect(plain.body, lambda x: isinstance(x, For)) if x.loop_var.name == "i")
    assert collect(plain_loop, lambda x: isinstance(x, IfThenElse))
    outer = next(x for x in collect(split.body, lambda x: isinstance(x, For)) if x.loop_var.name == "i.outer")
    assert int(outer.extent) == 3
    assert not collect(outer, lambda x: isinstance(x, IfThenElse))
    # the halves are constants in the main loop: every B index's first entry is an IntImm
    firsts = [x.indices[0] for x in collect(outer, lambda x: isinstance(x, BufferStore) and x.buffer.name == "B")]
    assert firsts and all(isinstance(e, loom.ir.IntImm) for e in firsts)


def test_allocation_is_doubled_and_hoisted():
    after = InjectDoubleBuffer(split_loop=0)(pipeline(4))
    assert isinstance(after.body, Allocate) and [int(e) for e in after.body.extents] == [2, 2]
    assert not collect(after.body.body, lambda x: isinstance(x, Allocate))


def test_scope_outside_a_loop_is_dropped():
    B = loom.decl_buffer((1,), "float32", name="B")
    body = Allocate(B.data, "float32", [1], True, seq(
        AttrStmt(B.data, "double_buffer_scope", 1, BufferStore(B, A[0], [0])), BufferStore(C, B[0], [0])))
    after = inject_double_buffer(body)
    expected = Allocate(B.data, "float32", [1], True, seq(BufferStore(B, A[0], [0]), BufferStore(C, B[0], [0])))
    loom.assert_structural_equal(after, expected)


def test_buffer_read_after_the_loop_is_not_doubled():
    B = loom.decl_buffer((1,), "float32", name="B")
    i = loom.var("i")
    loop = For(i, 0, 4, "serial", seq(AttrStmt(B.data, "double_buffer_scope", 1, BufferStore(B, A[i], [0])),
                                      BufferStore(C, B[0], [i])))
    f = PrimFunc([A.data, C.data], Allocate(B.data, "float32", [1], True, seq(loop, BufferStore(C, B[0], [8]))),
                 buffer_map={A.data: A, C.data: C})
    after = InjectDoubleBuffer()(f)
    assert [int(e) for e in after.body.extents] == [1]
    np.testing.assert_array_equal(run(after), run(f))


def test_negative_split_is_an_error():
    with pytest.raises(LoomValueError, match="split_loop"):
        InjectDoubleBuffer(split_loop=-1)(pipeline(4))


@pytest.mark.parametrize("seed", range(15))
def test_programs_without_scopes_are_left_alone(seed):
    f, _ = random_func(seed)
    assert InjectDoubleBuffer()(f) is f


def test_scheduled_double_buffer_through_the_driver():
    from loom import te
    from loom.driver import build, build_config, lower

    X = te.placeholder((7, 4), name="X")
    T = te.compute((7, 4), lambda i, j: X[i, j] + 1.0, name="T")
    Z = te.compute((7, 4), lambda i, j: T[i, 3 - j] * 2.0, name="Z")
    s = te.create_schedule(Z.op)
    s[T].compute_at(s[Z], Z.op.axis[0])
    s[T].set_scope("shared")
    s[T].double_buffer()
    x = np.arange(28, dtype="float32").reshape(7, 4)
    for split in (0, 2):
        with build_config(double_buffer_split_loop=split):
            body = lower(s, [X, Z])["default_function"].body
            z = np.zeros((7, 4), "float32")
            build(s, [X, Z], target="interp")(x, z)
        assert [int(e) for e in collect(body, lambda x: isinstance(x, Allocate))[0].extents][0] == 2
        names = {v.loop_var.name for v in collect(body, lambda x: isinstance(x, For))}
        assert ("i.outer" in names) == (split == 2)
        np.testing.assert_array_equal(z, (x + 1)[:, ::-1] * 2)
