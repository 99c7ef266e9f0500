"""The ``Shuffle`` expression (TVM's ``tir.Shuffle``): construction, text, equality, JSON, analysis, and
programs that use it on every installed CPU kind (and in a CUDA kernel's source)."""

import numpy as np
import pytest

import loom
from loom.arith import Analyzer
from loom.errors import IRError, LoomTypeError
from loom.ir import (
    BufferLoad, BufferStore, For, IntImm, Mutator, Ramp, Shuffle, Var, collect, ir_transform, post_order_visit,
    substitute,
)
from loom.ir import expr as E
from loom.target import get_kind, list_kinds

CPU_KINDS = [k for k in list_kinds() if get_kind(k).device_type == 1]
N = 8
REVERSE = list(range(N - 1, -1, -1))


def test_the_cpu_kinds_include_the_shipped_ones():
    assert {"interp", "llvm", "c"} <= set(CPU_KINDS)


# --------------------------------------------------------------------------- the node


def test_dtype_is_the_element_type_with_one_lane_per_index():
    a, b = Var("a", "float32x4"), Var("b", "float32x4")
    assert Shuffle([a, b], [0, 4, 1, 5, 2, 6, 3, 7]).dtype == "float32x8"
    assert Shuffle([a], [3, 2]).dtype == "float32x2"
    assert Shuffle([a, b], [6]).dtype == "float32"  # one index: a scalar
    assert Shuffle([Var("x"), Var("y")], [1, 0]).dtype == "int32x2"  # scalars are one lane each
    assert Shuffle([Ramp(0, 1, 8)], REVERSE).dtype == "int32x8"
    assert E.Shuffle is Shuffle and loom.ir.Shuffle is Shuffle and Shuffle.type_key == "tir.Shuffle"


def test_python_ints_become_int32_constants():
    s = Shuffle([Var("a", "int8x4")], [np.int64(3), 0])
    assert all(isinstance(i, IntImm) and i.dtype == "int32" for i in s.indices)
    assert s.index_values == (3, 0)
    numbers = Shuffle([Var("a", "float16x2"), 1.5], [2, 0])  # a number takes the vectors' element type
    assert numbers.vectors[1].dtype == "float16" and numbers.dtype == "float16x2"


def test_concat_and_extract_element():
    a, b = Var("a", "int32x4"), Var("b", "int32x2")
    cat = Shuffle.concat([a, b])
    assert cat.dtype == "int32x6" and cat.index_values == tuple(range(6))
    assert Shuffle.concat([a]) is a  # as TVM's Shuffle::Concat
    one = Shuffle.extract_element(a, 3)
    assert one.dtype == "int32" and one.index_values == (3,)


@pytest.mark.parametrize("vectors, indices, message", [
    ([], [0], "needs at least one vector"),
    ([Var("a", "int32x4")], [], "needs at least one index"),
    ([Var("a", "int32x4"), Var("b", "float32x4")], [0], r"differ in element type: vectors\[0\] is int32x4 but "
                                                         r"vectors\[1\] is float32x4"),
    ([Var("a", "int32x4"), Var("b", "int64")], [0], "differ in element type"),
    ([Var("a", "int32x4")], [4], r"index 4 \(indices\[0\]\) is out of range: the vectors have 4 lanes in all"),
    ([Var("a", "int32x4"), Var("b")], [0, 5], r"index 5 \(indices\[1\]\) is out of range: .* 5 lanes"),
    ([Var("a", "int32x4")], [-1], "index -1 .* out of range"),
    ([Var("a", "int32x4")], [1 << 40], "out of range"),
    ([Var("a", "int32x4")], [Var("i")], r"integer constants, but indices\[0\] is i \(int32\)"),
    ([Var("a", "int32x4")], [loom.const(1.0)], "integer constants"),
    ([Var("a", "int32x4")], [loom.const(True)], "integer constants"),
])
def test_invalid_shuffles_are_refused(vectors, indices, message):
    with pytest.raises(IRError, match=message):
        Shuffle(vectors, indices)


def test_what_is_not_an_expression_is_a_type_error():
    with pytest.raises(LoomTypeError):
        Shuffle([Var("a", "int32x4")], ["0"])
    with pytest.raises(LoomTypeError):
        Shuffle([Var("a", "int32x4"), "b"], [0])


def test_text():
    a, b = Var("a", "float32x4"), Var("b", "float32x4")
    assert str(Shuffle([a, b], [0, 4, 1, 5])) == "shuffle([a, b], [0, 4, 1, 5])"
    assert str(Shuffle([Ramp(0, 1, 8)], REVERSE)) == "shuffle([ramp(0, 1, 8)], [7, 6, 5, 4, 3, 2, 1, 0])"
    assert str(Shuffle.extract_element(a + b, 2) * 2.0) == "shuffle([a + b], [2]) * 2.0"
    assert str(Shuffle([a], [IntImm("int64", 1), 0])) == "shuffle([a], [int64(1), 0])"


def test_structural_equality_hash_and_json():
    a, b = Var("a", "int32x4"), Var("b", "int32x4")
    s = Shuffle([a + 1, b], [0, 4, 1, 5])
    assert loom.structural_equal(s, Shuffle([a + 1, b], [0, 4, 1, 5]))
    assert loom.structural_hash(s) == loom.structural_hash(Shuffle([a + 1, b], [0, 4, 1, 5]))
    assert not loom.structural_equal(s, Shuffle([a + 1, b], [0, 4, 1, 6]))
    assert not loom.structural_equal(s, Shuffle([b, a + 1], [0, 4, 1, 5]))
    back = loom.load_json(loom.save_json(s))
    assert isinstance(back, Shuffle) and str(back) == str(s) and back.dtype == "int32x4"
    assert loom.structural_equal(back, s, map_free_vars=True)


def test_visitors_and_mutators():
    a, b = Var("a", "int32x4"), Var("b", "int32x4")
    s = Shuffle([a + 1, b], [0, 4])
    seen = []
    post_order_visit(s, lambda n: seen.append(type(n).__name__))
    assert seen[-1] == "Shuffle" and seen.count("Var") == 2 and seen.count("IntImm") == 3

    class SwapA(Mutator):
        def visit_Var(self, v):
            return b if v is a else v

    assert str(SwapA().visit(s)) == "shuffle([b + broadcast(1, 4), b], [0, 4])"
    assert str(substitute(s, {b: a})) == "shuffle([a + broadcast(1, 4), a], [0, 4])"
    assert len(collect(s, lambda n: isinstance(n, Shuffle))) == 1


def test_the_analyzer_takes_shuffles():
    an, x = Analyzer(), Var("x")
    s = Shuffle([Ramp(x * 2 + x, 1, 4)], [3, 2, 1, 0])
    assert str(an.simplify(s)) == "shuffle([ramp(x * 3, 1, 4)], [3, 2, 1, 0])"
    assert str(an.canonical_simplify(s)) == "shuffle([ramp(x * 3, 1, 4)], [3, 2, 1, 0])"
    an.const_int_bound(s)
    an.modular_set(s)
    assert str(an.simplify(Shuffle.extract_element(Ramp(x, 1, 4), 1) + 0)) == "shuffle([ramp(x, 1, 4)], [1])"


# --------------------------------------------------------------------------- programs


def _hand_vectorized(value):
    """A phase-1 pass: the loop of ``N`` iterations storing ``c[base + i]`` becomes one store to
    ``c[ramp(base, 1, N)]`` of ``value(buffers, ramp)`` (buffers by name, the loop's loads')."""

    def rewrite(loop):
        store = loop.body
        if not (isinstance(loop, For) and isinstance(store, BufferStore) and int(loop.extent) == N):
            return None
        ramp = Ramp(substitute(store.indices[0], {loop.loop_var: 0}), 1, N)
        buffers = {x.buffer.name: x.buffer for x in collect(store.value, lambda n: isinstance(n, BufferLoad))}
        return BufferStore(store.buffer, value(buffers, ramp), [ramp])

    return lambda stmt: ir_transform(stmt, None, rewrite, ["For"])


def _build(kind, value, dtype="int32", n=N, bind=False):
    """``c[i] = a[i] + b[i]`` over ``n`` elements, hand-vectorized by ``N`` with ``value``."""
    a = loom.placeholder((n,), dtype, name="a")
    b = loom.placeholder((n,), dtype, name="b")
    c = loom.compute((n,), lambda i: a[i] + b[i], name="c")
    s = loom.create_schedule(c.op)
    if bind:
        outer, _ = s[c].split(c.op.axis[0], factor=N)
        s[c].bind(outer, loom.thread_axis("threadIdx.x"))
    with loom.build_config(add_lower_pass=[(1, _hand_vectorized(value))]):
        if kind == "lower":
            return loom.lower(s, [a, b, c])
        return loom.build(s, [a, b, c], target=kind, **({"target_host": "llvm"} if kind.startswith("cuda") else {}))


def _load(buf, base, lanes):
    return BufferLoad(buf, [Ramp(loom.const(base), 1, lanes)])


def _tvm_reverse(bufs, ramp):  # TVM's test: c[x] = a[x] + b[7 - x], the index of b a reversed ramp
    return BufferLoad(bufs["a"], [ramp]) + BufferLoad(bufs["b"], [Shuffle([ramp], REVERSE)])


def _reverse_value(bufs, ramp):
    return Shuffle([BufferLoad(bufs["a"], [ramp])], REVERSE) + BufferLoad(bufs["b"], [ramp])


def _scalar_loads(bufs, ramp):  # TVM's second form: eight scalar loads of b, picked in reverse
    return BufferLoad(bufs["a"], [ramp]) + Shuffle([BufferLoad(bufs["b"], [loom.const(i)]) for i in range(N)], REVERSE)


def _concat(bufs, ramp):
    return Shuffle.concat([_load(bufs["a"], 0, 4), _load(bufs["b"], 4, 4)])


def _interleave(bufs, ramp):
    return Shuffle([_load(bufs["a"], 0, 4), _load(bufs["b"], 0, 4)], [0, 4, 1, 5, 2, 6, 3, 7])


def _extract(bufs, ramp):
    return E.Broadcast(Shuffle.extract_element(BufferLoad(bufs["a"], [ramp]), 5), N) + BufferLoad(bufs["b"], [ramp])


def _mixed(bufs, ramp):  # a scalar and vectors of different widths: 4 + 1 + 2 lanes
    parts = [_load(bufs["a"], 0, 4), BufferLoad(bufs["b"], [loom.const(3)]), _load(bufs["a"], 6, 2)]
    return Shuffle(parts, [6, 4, 0, 5, 1, 3, 2, 4])


def _three(bufs, ramp):  # three vectors of one type
    parts = [_load(bufs["a"], 0, 4), _load(bufs["b"], 0, 4), _load(bufs["a"], 4, 4)]
    return Shuffle(parts, [11, 0, 7, 4, 8, 3, 9, 10])


def _nested(bufs, ramp):  # a shuffle of shuffles, one of them scalar
    rev = Shuffle([BufferLoad(bufs["a"], [ramp])], REVERSE)
    return Shuffle([Shuffle([rev], [1, 0]), Shuffle.extract_element(rev, 7), _load(bufs["b"], 0, 4)],
                   [0, 1, 2, 3, 4, 5, 6, 2])


def _bool_mask(bufs, ramp):  # a shuffle of bools: a reversed comparison picks lanes
    x, y = BufferLoad(bufs["a"], [ramp]), BufferLoad(bufs["b"], [ramp])
    return E.Select(Shuffle([x > y], REVERSE), x, y)


def _expected(name, a, b):
    return {
        "tvm_reverse": a + b[::-1],
        "reverse": a[::-1] + b,
        "scalar_loads": a + b[::-1],
        "concat": np.concatenate([a[:4], b[4:]]),
        "interleave": np.stack([a[:4], b[:4]], 1).reshape(-1),
        "extract": a[5] + b,
        "mixed": np.concatenate([a[:4], b[3:4], a[6:8]])[[6, 4, 0, 5, 1, 3, 2, 4]],
        "three": np.concatenate([a[:4], b[:4], a[4:8]])[[11, 0, 7, 4, 8, 3, 9, 10]],
        "bool_mask": np.where((a > b)[::-1], a, b),
        "nested": np.concatenate([a[::-1][[1, 0]], a[::-1][7:8], b[:4]])[[0, 1, 2, 3, 4, 5, 6, 2]],
    }[name]


PROGRAMS = {"tvm_reverse": _tvm_reverse, "reverse": _reverse_value, "scalar_loads": _scalar_loads,
            "concat": _concat, "interleave": _interleave, "extract": _extract, "mixed": _mixed,
            "three": _three, "nested": _nested, "bool_mask": _bool_mask}


def test_the_lowered_program_holds_the_shuffle():
    text = str(_build("lower", _tvm_reverse))
    assert "c[ramp(0, 1, 8)] = a[ramp(0, 1, 8)] + b[shuffle([ramp(0, 1, 8)], [7, 6, 5, 4, 3, 2, 1, 0])]" in text


@pytest.mark.parametrize("dtype", ["int32", "float32", "int8"])
@pytest.mark.parametrize("name", sorted(PROGRAMS))
@pytest.mark.parametrize("kind", CPU_KINDS)
def test_programs_with_shuffles_agree_with_numpy(kind, name, dtype):
    f = _build(kind, PROGRAMS[name], dtype)
    a = np.arange(1, N + 1).astype(dtype)
    b = np.array([-3, 9, 0, 7, 2, 11, 5, 4]).astype(dtype)
    c = np.zeros(N, dtype)
    f(a, b, c)
    np.testing.assert_array_equal(c, _expected(name, a, b).astype(dtype))


def test_llvm_emits_shufflevectors():
    for value in (_reverse_value, _interleave, _mixed):
        assert "shufflevector" in _build("llvm", value).get_source()  # the module's LLVM IR


def test_the_c_source_builds_the_result_lane_by_lane():
    src = _build("c", _reverse_value).get_source()
    assert "[0] = " in src and "[7] = " in src


def test_a_gpu_kernel_with_shuffles_on_the_interpreter_and_in_cuda_source():
    n = 4 * N
    a = np.arange(n).astype("float32")
    b = (np.arange(n) * 10).astype("float32")
    c = np.zeros(n, "float32")
    _build("interp", _tvm_reverse_blocks, "float32", n, bind=True)(a, b, c)
    np.testing.assert_array_equal(c, a + b.reshape(-1, N)[:, ::-1].reshape(-1))
    pytest.importorskip("loom_cuda")
    from loom_cuda.nvcc import find_nvcc

    if find_nvcc() is None:
        pytest.skip("nvcc is not installed")
    cu = _build("cuda -arch=sm_80", _tvm_reverse_blocks, "float32", n, bind=True).imported_modules[0]
    assert "default_function_kernel0" in cu.get_source()


def _tvm_reverse_blocks(bufs, ramp):  # within each block of N: c[x] = a[x] + b[block + N - 1 - x]
    rev = Shuffle([ramp], REVERSE)
    return BufferLoad(bufs["a"], [ramp]) + BufferLoad(bufs["b"], [rev])
