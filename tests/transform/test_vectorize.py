"""VectorizeLoop: ramps and broadcasts for vectorized loops, serial fallback otherwise."""

import numpy as np
import pytest

import loom
from loom.ir import BufferStore, Broadcast, For, ForKind, IfThenElse, LetStmt, PrimFunc, Ramp
from loom.testing.random_programs import assert_same_result, random_func
from loom.transform import PassContext
from loom.transform.vectorize import SkipVectorize, VectorizeLoop, vectorize_loop

A = loom.decl_buffer((4, 8), "int32", name="A")
B = loom.decl_buffer((4, 8), "int32", name="B")


def func(body):
    return PrimFunc([A.data, B.data], body, buffer_map={A.data: A, B.data: B})


def ramp(base, lanes=4, stride=1):
    return Ramp(loom.const(base) if isinstance(base, int) else base, loom.const(stride), lanes)


@pytest.mark.parametrize("seed", range(40))
def test_random_programs_keep_their_result(seed):
    f, make_args = random_func(seed)
    g = VectorizeLoop()(f)
    loom.verify_well_formed(g)
    assert_same_result(f, g, make_args)


def test_elementwise_body_becomes_vector_code():
    """``B[r, i] = A[r, i] * 2 + 1`` over i in vectorize(4): ramps for i, broadcasts for constants."""
    r, i = loom.var("r"), loom.var("i")
    before = For(r, 0, 4, "serial", For(i, 0, 4, "vectorized", BufferStore(B, A[r, i] * 2 + 1, [r, i])))
    r_ = ramp(0)
    want = For(r, 0, 4, "serial", BufferStore(
        B, A[r, r_] * Broadcast(loom.const(2), 4) + Broadcast(loom.const(1), 4), [r, r_]))
    loom.assert_structural_equal(vectorize_loop(before), want)


def test_affine_index_stays_a_ramp():
    """``i * 2 + r`` with i vectorized is ``ramp(r, 2, 4)``; the min of the loop is the ramp base."""
    r, i = loom.var("r"), loom.var("i")
    flat = loom.decl_buffer((64,), "int32", name="F")
    before = For(i, 1, 4, "vectorized", BufferStore(flat, r, [i * 2 + r]))
    got = vectorize_loop(before)
    want = BufferStore(flat, Broadcast(r, 4), [Ramp(loom.const(2) + r, loom.const(2), 4)])
    loom.assert_structural_equal(got, want)


def test_let_gets_a_vector_variable():
    """A let whose value depends on the vector lane binds a vector variable."""
    i, x = loom.var("i"), loom.var("x")
    got = vectorize_loop(For(i, 0, 4, "vectorized", LetStmt(x, A[0, i] + 1, BufferStore(B, x, [0, i]))))
    assert isinstance(got, LetStmt) and str(got.var.dtype) == "int32x4"
    assert got.body.value is got.var


@pytest.mark.parametrize("make_body", [
    lambda i: IfThenElse(i < 2, BufferStore(B, A[0, i], [0, i])),              # branch on the lane
    lambda i: For(loom.var("k"), 0, 2, "serial", BufferStore(B, A[0, i], [0, i])),  # nested loop
    lambda i: BufferStore(B, A[0, i], [0, 0]),                                  # every lane stores one place
    lambda i: loom.ir.Evaluate(loom.call_extern("int32", "f", i)),             # impure call
], ids=["if", "nested-loop", "same-place", "extern-call"])
def test_unvectorizable_bodies_fall_back_to_serial(make_body):
    """The loop keeps its body and becomes serial."""
    i = loom.var("i")
    loop = For(i, 0, 4, "vectorized", make_body(i))
    got = vectorize_loop(loop)
    assert isinstance(got, For) and got.kind is ForKind.SERIAL and got.body is loop.body


def test_invariant_branch_is_kept_around_vector_code():
    """A condition that does not depend on the lane stays a scalar if."""
    i, r = loom.var("i"), loom.var("r")
    got = vectorize_loop(For(i, 0, 4, "vectorized", IfThenElse(r < 2, BufferStore(B, A[r, i], [r, i]))))
    assert isinstance(got, IfThenElse) and isinstance(got.then_case.indices[1], Ramp)


@pytest.mark.parametrize("serial_side", ["then", "else"])
def test_invariant_branch_with_one_unvectorizable_side_keeps_that_side_serial(serial_side):
    """As TVM: ``if x < n`` around the lanes vectorizes one branch; the other runs as a serial loop."""
    i, x, n = loom.var("i"), loom.var("x"), loom.var("n")
    vec = BufferStore(B, A[0, i] + 1, [0, i])
    ser = IfThenElse(i < n, BufferStore(B, loom.const(2), [0, i]))  # depends on the lane
    then_case, else_case = (vec, ser) if serial_side == "else" else (ser, vec)
    f = PrimFunc([A.data, B.data, x, n], For(i, 0, 4, "vectorized", IfThenElse(x < n, then_case, else_case)),
                 buffer_map={A.data: A, B.data: B})
    got = VectorizeLoop()(f).body
    assert isinstance(got, IfThenElse)
    vector_side, serial_loop = ((got.then_case, got.else_case) if serial_side == "else"
                                else (got.else_case, got.then_case))
    assert isinstance(vector_side, BufferStore) and str(vector_side.value.dtype) == "int32x4"
    assert isinstance(serial_loop, For) and serial_loop.kind is ForKind.SERIAL and serial_loop.body is ser
    loom.verify_well_formed(VectorizeLoop()(f))
    for xv, nv in [(0, 1), (3, 1), (1, 3), (0, 0)]:
        assert_same_result(f, VectorizeLoop()(f), lambda: [np.arange(32, dtype="int32").reshape(4, 8),
                                                           np.zeros((4, 8), "int32"), xv, nv])


def test_invariant_branch_with_both_sides_unvectorizable_makes_the_loop_serial():
    i, x, n = loom.var("i"), loom.var("x"), loom.var("n")
    ser = IfThenElse(i < n, BufferStore(B, loom.const(2), [0, i]))
    loop = For(i, 0, 4, "vectorized", IfThenElse(x < n, ser, ser))
    got = vectorize_loop(loop)
    assert isinstance(got, For) and got.kind is ForKind.SERIAL and got.body is loop.body


def test_disable_vectorize_makes_loops_serial():
    """Under tir.disable_vectorize the pass (and SkipVectorize) only change the loop kind."""
    i = loom.var("i")
    loop = For(i, 0, 4, "vectorized", BufferStore(B, A[0, i], [0, i]))
    f = func(loop)
    with PassContext(config={"tir.disable_vectorize": True}):
        got = VectorizeLoop()(f).body
    loom.assert_structural_equal(got, loop.with_(kind="serial"))
    loom.assert_structural_equal(SkipVectorize()(f).body, loop.with_(kind="serial"))


def test_symbolic_extent_stays_serial():
    """Lanes must be a constant: a symbolic extent falls back to a serial loop."""
    n, i = loom.var("n"), loom.var("i")
    got = vectorize_loop(For(i, 0, n, "vectorized", BufferStore(B, A[0, i], [0, i])))
    assert got.kind is ForKind.SERIAL


def test_ramps_of_vector_elements_widen_into_one_ramp():
    """``A[j]`` of a ``float32x4`` pointer is ``A[ramp(j * 4, 1, 4)]``; vectorizing j gives one 16-lane ramp."""
    j = loom.var("j")
    flat = loom.decl_buffer((64,), "float32", name="F")
    idx = Ramp(j * 4, loom.const(1), 4)
    before = For(j, 0, 4, "vectorized", BufferStore(flat, flat[idx] + Broadcast(loom.const(1.0), 4), [idx]))
    wide = Ramp(loom.const(0), loom.const(1), 16)
    want = BufferStore(flat, flat[wide] + Broadcast(loom.const(1.0), 16), [wide])
    loom.assert_structural_equal(vectorize_loop(before), want)


@pytest.mark.parametrize("make_index", [
    lambda j: Ramp(j * 8, loom.const(1), 4),   # gaps between the iterations' elements
    lambda j: Ramp(loom.const(0), j, 4),       # the stride varies
    lambda j: Ramp(j * 4, loom.const(1), 32),  # 4 x 32 lanes is more than a vector holds
], ids=["gaps", "varying-stride", "too-wide"])
def test_ramps_that_cannot_widen_stay_serial(make_index):
    j = loom.var("j")
    flat = loom.decl_buffer((256,), "float32", name="F")
    idx = make_index(j)
    loop = For(j, 0, 4, "vectorized", BufferStore(flat, Broadcast(loom.const(1.0), idx.lanes), [idx]))
    got = vectorize_loop(loop)
    assert isinstance(got, For) and got.kind is ForKind.SERIAL and got.body is loop.body


def test_a_vector_element_loop_through_ir_builder_runs_widened_on_every_backend():
    """TVM's test_vectorize_vector: an ir_builder loop over ``float32x4`` elements, vectorized, computes the same."""
    n = 3

    def body(ins, outs):
        ib = loom.ir_builder.create()
        a, c = ib.buffer_ptr(ins[0]), ib.buffer_ptr(outs[0])
        with ib.for_range(0, n, name="i") as i:
            with ib.for_range(0, 4, for_type="vectorize", name="j") as j:
                c[i * 4 + j] = a[i * 4 + j] * loom.const(2.0, "float32x4")
        return ib.get()

    A = loom.placeholder((n * 4,), "float32x4", name="A")
    C = loom.extern((n * 4,), [A], body, name="C", dtype="float32x4")
    s = loom.create_schedule(C.op)
    lowered = str(loom.lower(s, [A, C]))
    assert ", 1, 16)]" in lowered and "vectorize" not in lowered
    a = np.arange(n * 16, dtype="float32").reshape(n * 4, 4)
    for kind in ("interp", "llvm", "c"):
        c = np.zeros_like(a)
        loom.build(s, [A, C], kind)(a, c)
        np.testing.assert_allclose(c, a * 2)


def _guarded(cond, load):
    """``C[i] = if_then_else(cond(i), load(i), 0)`` over 64 elements, i split by 8 and vectorized."""
    A = loom.placeholder((64,), name="A")
    C = loom.compute((64,), lambda i: loom.if_then_else(cond(i), load(A, i), 0.0), name="C")
    s = loom.create_schedule(C.op)
    s[C].vectorize(s[C].split(C.op.axis[0], factor=8)[1])
    return s, A, C


@pytest.mark.parametrize("cond, load, want", [
    (lambda i: i >= 1, lambda A, i: A[i - 1], lambda a: np.concatenate([[0], a[:-1]])),    # padding: A[-1]
    (lambda i: i < 63, lambda A, i: A[i + 1], lambda a: np.concatenate([a[1:], [0]])),     # A[64]
], ids=["reads-before", "reads-past"])
def test_a_load_kept_in_bounds_by_if_then_else_keeps_the_loop_serial(cond, load, want, caplog):
    """Vector code would read every lane of both branches, so ``A[-1]`` / ``A[64]``: as TVM, the loop stays serial.

    Before, llvm and c read outside ``A`` and the interpreter (the oracle) raised out-of-bounds.
    """
    s, A, C = _guarded(cond, load)
    with caplog.at_level("WARNING", logger="loom.transform.vectorize"):
        lowered = str(loom.lower(s, [A, C]))
    assert "ramp" not in lowered
    assert "may be out of bounds" in caplog.text
    a = np.arange(1, 65, dtype="float32")
    for kind in ("interp", "llvm", "c"):
        c = np.full(64, -1, "float32")
        loom.build(s, [A, C], kind)(a, c)
        np.testing.assert_array_equal(c, want(a), err_msg=kind)


def test_if_then_else_over_loads_in_bounds_on_every_lane_is_vectorized():
    """``if_then_else(i < 32, A[i], 0)``: the load is in bounds whatever the guard, so the select is lane-wise."""
    s, A, C = _guarded(lambda i: i < 32, lambda A, i: A[i])
    assert "ramp" in str(loom.lower(s, [A, C]))
    a = np.arange(1, 65, dtype="float32")
    for kind in ("interp", "llvm", "c"):
        c = np.zeros(64, "float32")
        loom.build(s, [A, C], kind)(a, c)
        np.testing.assert_array_equal(c, np.where(np.arange(64) < 32, a, 0), err_msg=kind)


def test_a_guard_the_same_on_every_lane_stays_scalar_and_guards_the_vector_load():
    """Padding rows: ``if_then_else(1 <= i < 7, A[i - 1, j], -1)`` vectorized over ``j``.

    The condition does not depend on the lane, so it stays a scalar and only the taken
    side runs: row ``A[-1]`` is never read.  Before, the condition was broadcast, and the
    interpreter raised out-of-bounds while llvm and c read before ``A``.
    """
    A = loom.placeholder((6, 4), name="A")
    B = loom.compute((8, 4), lambda i, j: loom.if_then_else(loom.all(i >= 1, i < 7), A[i - 1, j], loom.const(-1.0)),
                     name="B")
    s = loom.create_schedule(B.op)
    s[B].vectorize(B.op.axis[1])
    lowered = str(loom.lower(s, [A, B]))
    assert "if_then_else(1 <= i and i < 7, A[i - 1, ramp(0, 1, 4)], broadcast(-1.0, 4))" in lowered
    a = np.arange(24, dtype="float32").reshape(6, 4)
    want = np.concatenate([np.full((1, 4), -1, "float32"), a, np.full((1, 4), -1, "float32")])
    for kind in ("interp", "llvm", "c"):
        b = np.zeros((8, 4), "float32")
        loom.build(s, [A, B], kind)(a, b)
        np.testing.assert_array_equal(b, want, err_msg=kind)


def _pointer_loop(value):
    """``A[i] = value(A, i)`` over a vectorized loop of 4, ``A`` an ``ir_builder.pointer`` (size unknown)."""
    ib = loom.ir_builder.create()
    A = ib.pointer("float32", name="A")
    with ib.for_range(0, 4, for_type="vectorize", name="i") as i:
        A[i] = value(A, i)
    return vectorize_loop(ib.get())


def test_guarded_load_of_a_pointer_of_unknown_size_keeps_the_loop_serial():
    """The view of a pointer declares the largest int32 extent, which says nothing of the memory behind it:
    ``if_then_else(i < 3, A[i + 100], 0)`` may be all that keeps ``A[103]`` from being read."""
    stmt = _pointer_loop(lambda A, i: loom.if_then_else(i < 3, A[i + 100], 0.0))
    assert isinstance(stmt, For) and "ramp" not in str(stmt)


def test_a_load_both_branches_make_is_read_on_every_lane_anyway():
    """TVM's ``if_then_else(i > 0, A[i] + 1, A[i])`` reads ``A[i]`` whichever side a lane takes: vectorized."""
    stmt = _pointer_loop(lambda A, i: loom.if_then_else(i > 0, A[i] + 1.0, A[i]))
    assert not isinstance(stmt, For) and "ramp" in str(stmt)
