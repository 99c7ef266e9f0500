"""Stage.prefetch (TVM's schedule primitive) and the prefetch intrinsic: cache hints that change no result."""

import logging

import numpy as np
import pytest

import loom

KINDS = ("interp", "llvm", "c")


def _rows_ahead(offset=2, n=64):
    A = loom.placeholder((n, n), name="A")
    B = loom.compute((n, n), lambda i, j: A[i, j] * 2, name="B")
    s = loom.create_schedule(B.op)
    s[B].prefetch(A, B.op.axis[0], offset)
    return s, A, B


def _run_everywhere(s, args, make_inputs, want, **config):
    for kind in KINDS:
        with loom.build_config(**config):
            f = loom.build(s, args, kind)
        arrays = make_inputs()
        f(*arrays)
        np.testing.assert_allclose(arrays[-1], want(*arrays[:-1]), rtol=1e-5, err_msg=kind)
    return f


def test_a_row_ahead_becomes_one_hint_per_cache_line_and_changes_nothing():
    """Row ``i + 2`` of a 64-float row is four 64-byte lines; the last rows slide back into the tensor."""
    s, A, B = _rows_ahead()
    lowered = str(loom.lower(s, [A, B], simple_mode=True))
    assert "for A.prefetch1 in range(4):" in lowered
    assert "prefetch(A[min(i + 2, 63), A.prefetch1 * 16], 0, 3)" in lowered
    rng = np.random.default_rng(0)
    _run_everywhere(s, [A, B], lambda: [rng.random((64, 64), dtype="float32"), np.zeros((64, 64), "float32")],
                    lambda a: a * 2, instrument_bound_checkers=True)


def test_llvm_and_c_emit_the_hint():
    s, A, B = _rows_ahead()
    assert "call void @llvm.prefetch.p0(" in loom.build(s, [A, B], "llvm").get_source("ll")
    assert "__builtin_prefetch(" in loom.build(s, [A, B], "c").get_source()


def test_a_read_only_input_is_still_accepted():
    """A prefetch only reads: the input does not count as written (unlike address_of)."""
    s, A, B = _rows_ahead()
    a = np.ones((64, 64), "float32")
    a.setflags(write=False)
    for kind in KINDS:
        b = np.zeros((64, 64), "float32")
        loom.build(s, [A, B], kind)(a, b)
        np.testing.assert_array_equal(b, 2)


def test_the_region_relaxes_the_inner_loops_of_a_split_matmul():
    """Prefetching B in the outer k loop fetches the next tile of rows (every column) of B."""
    n = 32
    A = loom.placeholder((n, n), name="A")
    B = loom.placeholder((n, n), name="B")
    k = loom.reduce_axis((0, n), name="k")
    C = loom.compute((n, n), lambda i, j: loom.sum(A[i, k] * B[k, j], axis=k), name="C")
    s = loom.create_schedule(C.op)
    ko, ki = s[C].split(k, factor=4)
    i, j = C.op.axis
    s[C].reorder(i, ko, ki, j)
    s[C].prefetch(B, ko, 1)
    lowered = str(loom.lower(s, [A, B, C], simple_mode=True))
    assert "for B.prefetch0 in range(4):" in lowered and "for B.prefetch1 in range(2):" in lowered
    rng = np.random.default_rng(1)
    _run_everywhere(s, [A, B, C], lambda: [rng.random((n, n), dtype="float32"), rng.random((n, n), dtype="float32"),
                                           np.zeros((n, n), "float32")],
                    lambda a, b: a @ b, instrument_bound_checkers=True)


def test_symbolic_shapes_stay_in_bounds():
    n = loom.var("n")
    A = loom.placeholder((n,), name="A")
    B = loom.compute((n,), lambda i: A[i] + 1, name="B")
    s = loom.create_schedule(B.op)
    xo, xi = s[B].split(B.op.axis[0], factor=8)
    s[B].prefetch(A, xo, 4)
    for size in (1, 37, 100):
        _run_everywhere(s, [A, B], lambda: [np.arange(size, dtype="float32"), np.zeros(size, "float32")],
                        lambda a: a + 1, instrument_bound_checkers=True)


def test_a_producer_computed_inside_is_fetched_only_where_it_is_stored():
    """P lives one row at a time inside C's row loop: the hint stays in that row (the interpreter checks it)."""
    A = loom.placeholder((16, 64), name="A")
    P = loom.compute((16, 64), lambda i, j: A[i, j] * 3, name="P")
    C = loom.compute((16, 64), lambda i, j: P[i, j] + 1, name="C")
    s = loom.create_schedule(C.op)
    i, j = C.op.axis
    jo, ji = s[C].split(j, factor=16)
    s[P].compute_at(s[C], i)
    s[C].prefetch(P, jo, 1)
    assert "prefetch(P[" in str(loom.lower(s, [A, C], simple_mode=True))
    rng = np.random.default_rng(2)
    _run_everywhere(s, [A, C], lambda: [rng.random((16, 64), dtype="float32"), np.zeros((16, 64), "float32")],
                    lambda a: a * 3 + 1, instrument_bound_checkers=True)


def test_a_region_read_through_memory_is_skipped_with_a_warning(caplog):
    """``A[idx[i]]``: where the row will be is not known before the read, so nothing is fetched."""
    A = loom.placeholder((8, 16), name="A")
    idx = loom.placeholder((8,), name="idx", dtype="int32")
    B = loom.compute((8, 16), lambda i, j: A[idx[i], j], name="B")
    s = loom.create_schedule(B.op)
    s[B].prefetch(A, B.op.axis[0], 1)
    with caplog.at_level(logging.WARNING, logger="loom.transform.inject_prefetch"):
        lowered = str(loom.lower(s, [A, idx, B], simple_mode=True))
    assert "prefetch" not in lowered and "has no bound" in caplog.text
    a = np.arange(128, dtype="float32").reshape(8, 16)
    order = np.array([3, 1, 4, 1, 5, 0, 2, 6], "int32")
    for kind in KINDS:
        b = np.zeros((8, 16), "float32")
        loom.build(s, [A, idx, B], kind)(a, order, b)
        np.testing.assert_array_equal(b, a[order])


def test_the_schedule_keeps_its_prefetches_through_json():
    s, A, B = _rows_ahead(offset=3)
    attr = s[B].iter_var_attrs[B.op.axis[0]]
    assert list(attr.prefetch_data) == [A] and int(attr.prefetch_offset[0]) == 3
    again = loom.load_json(loom.save_json(s))
    A2, B2 = again.outputs[0].input_tensors[0], again.outputs[0].output(0)
    assert "prefetch(A[min(i + 3, 63)" in str(loom.lower(again, [A2, B2], simple_mode=True))
    copied = s.copy()
    assert copied[B].iter_var_attrs[B.op.axis[0]].prefetch == attr.prefetch


def test_bad_prefetches_are_refused():
    A = loom.placeholder((64, 64), name="A")
    other = loom.placeholder((64,), name="other")
    B = loom.compute((64, 64), lambda i, j: A[i, j] * 2, name="B")
    s = loom.create_schedule(B.op)
    i, j = B.op.axis
    with pytest.raises(loom.LoomValueError, match="does not read other"):
        s[B].prefetch(other, i, 1)
    with pytest.raises(loom.LoomTypeError, match="offset must be an int"):
        s[B].prefetch(A, i, 1.5)
    with pytest.raises(loom.LoomTypeError, match="expected the tensor"):
        s[B].prefetch("A", i, 1)
    jo, ji = s[B].split(j, factor=8)
    with pytest.raises(loom.LoomValueError, match="already split"):
        s[B].prefetch(A, j, 1)

    s[B].vectorize(ji)
    s[B].prefetch(A, ji, 1)
    with pytest.raises(loom.LoomValueError, match="is vectorized"):
        loom.lower(s, [A, B])


def test_a_prefetch_on_a_thread_axis_is_refused():
    A = loom.placeholder((64,), name="A")
    B = loom.compute((64,), lambda i: A[i] * 2, name="B")
    s = loom.create_schedule(B.op)
    bx, tx = s[B].split(B.op.axis[0], factor=32)
    s[B].bind(bx, loom.thread_axis("blockIdx.x"))
    s[B].bind(tx, loom.thread_axis("threadIdx.x"))
    s[B].prefetch(A, tx, 1)
    with pytest.raises(loom.LoomValueError, match="bound to threadIdx.x"):
        loom.lower(s, [A, B])


def test_the_intrinsic_from_ir_builder():
    """``loom.prefetch(A[i])`` in an extern body; the interpreter checks the element exists."""
    def body(ins, outs, ahead):
        ib = loom.ir_builder.create()
        a, b = ib.buffer_ptr(ins[0]), ib.buffer_ptr(outs[0])
        with ib.for_range(0, 64, name="i") as i:
            ib.emit(loom.prefetch(a[i + ahead], locality=1))
            b[i] = a[i] + 1.0
        return ib.get()

    A = loom.placeholder((64,), name="A")
    safe = loom.extern((64,), [A], lambda ins, outs: body(ins, outs, loom.const(0)), name="B", dtype="float32")
    s = loom.create_schedule(safe.op)
    a = np.arange(64, dtype="float32")
    for kind in KINDS:
        b = np.zeros(64, "float32")
        loom.build(s, [A, safe], kind)(a, b)
        np.testing.assert_array_equal(b, a + 1)
    past = loom.extern((64,), [A], lambda ins, outs: body(ins, outs, loom.const(8)), name="B", dtype="float32")
    with pytest.raises(loom.LoomError, match="out-of-bounds"):
        loom.build(loom.create_schedule(past.op), [A, past], "interp")(a, np.zeros(64, "float32"))


@pytest.mark.parametrize("rw, locality", [(2, 3), (0, 4), (True, 3), (0, "3")])
def test_the_intrinsic_checks_its_hints(rw, locality):
    A = loom.decl_buffer((8,), "float32", name="A")
    with pytest.raises(loom.LoomValueError, match="prefetch: "):
        loom.prefetch(A[0], rw, locality)
    with pytest.raises(loom.LoomTypeError, match="buffer element"):
        loom.prefetch(A[0] + 1.0)


def test_other_targets_drop_the_hint():
    """A target without a prefetch rule loses nothing: the call is gone after LowerIntrin."""
    s, A, B = _rows_ahead()
    mod = loom.lower(s, [A, B])
    lowered = loom.transform.LowerIntrin("ext_dev")(mod)
    assert "prefetch(" in str(mod) and "prefetch(" not in str(lowered)


def test_a_cuda_kernel_drops_the_hint_and_compiles():
    """CUDA has no prefetch of global memory from a thread's serial loop: the hint is dropped, nvcc accepts it."""
    pytest.importorskip("loom_cuda")
    from loom_cuda.nvcc import find_nvcc

    if find_nvcc() is None:
        pytest.skip("nvcc is not installed")
    A = loom.placeholder((64, 64), name="A")
    B = loom.compute((64, 64), lambda i, j: A[i, j] * 2, name="B")
    s = loom.create_schedule(B.op)
    i, j = B.op.axis
    s[B].bind(i, loom.thread_axis("blockIdx.x"))
    jo, ji = s[B].split(j, factor=32)
    s[B].bind(ji, loom.thread_axis("threadIdx.x"))
    s[B].prefetch(A, jo, 1)
    (cu,) = loom.build(s, [A, B], target="cuda -arch=sm_80", target_host="llvm").imported_modules
    assert "prefetch(" not in cu.get_source() and cu.cubin[:4] == b"\x7fELF"


def test_tvm_v06_spelling_of_the_intrinsic():
    """``call_intrin("int32", "prefetch", address_of(A[i]), 0, 3, 1)`` (TVM's test_llvm_intrin) builds and runs."""
    def body(ins, outs):
        ib = loom.ir_builder.create()
        a, b = ib.buffer_ptr(ins[0]), ib.buffer_ptr(outs[0])
        with ib.for_range(0, 16, name="i") as i:
            ib.emit(loom.call_intrin("int32", "prefetch", loom.address_of(a[i]), 0, 3, 1))
            b[i] = a[i] * 2.0
        return ib.get()

    A = loom.placeholder((16,), name="A")
    B = loom.extern((16,), [A], body, name="B", dtype="float32")
    s = loom.create_schedule(B.op)
    a = np.arange(16, dtype="float32")
    a.setflags(write=False)  # the hint only reads A
    for kind in KINDS:
        b = np.zeros(16, "float32")
        f = loom.build(s, [A, B], kind)
        f(a, b)
        np.testing.assert_array_equal(b, a * 2)
    assert "llvm.prefetch" in loom.build(s, [A, B], "llvm").get_source("ll")
