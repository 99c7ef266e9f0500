"""lower()/build() end to end with the real passes: every build_config option's effect on the IR."""

import numpy as np
import pytest

import loom
from loom.driver import build, build_config, lower
from loom.ir import (
    AssertStmt, BufferStore, FloorMod, For, IfThenElse, ProducerStore, Ramp, collect,
)
from loom.te.operation import compute, placeholder, thread_axis
from loom.te.schedule import create_schedule
from loom.transform import PassInfo, PrimFuncPass


def vadd(n=10, factor=4, vectorize=False):
    """``C = A + B`` with the axis split by ``factor`` (a guard when it does not divide ``n``)."""
    A = placeholder((n,), "float32", name="A")
    B = placeholder((n,), "float32", name="B")
    C = compute((n,), lambda i: A[i] + B[i], name="C")
    s = create_schedule(C.op)
    _, xi = s[C].split(C.op.axis[0], factor=factor)
    if vectorize:
        s[C].vectorize(xi)
    return s, [A, B, C]


def run_vadd(mod, n=10):
    rng = np.random.default_rng(0)
    a, b = rng.random(n, dtype="float32"), rng.random(n, dtype="float32")
    c = np.zeros(n, "float32")
    loom.testing.evaluate(mod["default_function"], a, b, c)
    np.testing.assert_allclose(c, a + b, rtol=1e-6)


def body(mod, name="default_function"):
    return mod[name].body


def count(node, cls):
    return len(collect(node, lambda n: isinstance(n, cls)))


def lowered(options=None, simple_mode=False, **schedule):
    s, args = vadd(**schedule)
    with build_config(**(options or {})):
        return lower(s, args, simple_mode=simple_mode)


def test_lower_returns_a_module_with_the_api_made():
    mod = lowered()
    f = mod["default_function"]
    assert list(mod.functions) == ["default_function"] and f.attrs["loom.api"] is True
    assert "tensor_binds" not in f.attrs
    run_vadd(mod)


def test_simple_mode_skips_unroll_partition_and_api():
    options = {"auto_unroll_max_step": 64, "partition_const_loop": True}
    mod = lowered(options, simple_mode=True)
    assert "loom.api" not in mod["default_function"].attrs
    assert count(body(mod), For) == 2 and count(body(mod), IfThenElse) == 1
    assert "for i.outer in range(3)" in str(mod)
    run_vadd(mod)


def test_auto_unroll_max_step_unrolls_small_nests():
    assert count(body(lowered()), For) == 2
    mod = lowered({"auto_unroll_max_step": 16})
    # 3 chunks of 4 unrolled; phase-3 Simplify drops the 2 stores the tail guard proves dead.
    assert count(body(mod), For) == 0 and count(body(mod), BufferStore) == 10
    run_vadd(mod)


def test_auto_unroll_max_depth_limits_the_nest_depth():
    mod = lowered({"auto_unroll_max_step": 16, "auto_unroll_max_depth": 1})
    [loop] = collect(body(mod), lambda n: isinstance(n, For))
    assert int(loop.extent) == 3 and count(loop.body, BufferStore) == 4
    run_vadd(mod)


def test_auto_unroll_max_extent_unrolls_short_loops():
    mod = lowered({"auto_unroll_max_extent": 2}, factor=2)
    [loop] = collect(body(mod), lambda n: isinstance(n, For))
    assert int(loop.extent) == 5 and count(loop.body, BufferStore) == 2
    run_vadd(mod)


def test_unroll_explicit_false_leaves_an_unroll_hint():
    mod = lowered({"auto_unroll_max_step": 16, "unroll_explicit": False})
    loops = collect(body(mod), lambda n: isinstance(n, For))
    assert len(loops) == 2 and all(loop.kind == "unrolled" for loop in loops)
    run_vadd(mod)


def test_disable_vectorize_leaves_no_ramp():
    vec = lowered(n=8, vectorize=True)
    assert count(body(vec), Ramp) > 0
    scalar = lowered({"disable_vectorize": True}, n=8, vectorize=True)
    assert count(body(scalar), Ramp) == 0 and count(body(scalar), For) == 2
    run_vadd(vec, 8)
    run_vadd(scalar, 8)


def test_partition_const_loop_splits_off_the_guard():
    plain = lowered()
    assert count(body(plain), IfThenElse) == 1 and count(body(plain), For) == 2
    mod = lowered({"partition_const_loop": True})
    nests = [n for n in body(mod).seq if isinstance(n, For)]
    assert len(nests) == 2
    # The tail (the last 2 elements) is split again: its guard is decided too.
    assert count(nests[0], IfThenElse) == 0 and count(nests[1], IfThenElse) == 0 and nests[1].extent.value == 2
    run_vadd(mod)


def test_data_alignment_and_offset_factor_reach_the_buffers():
    mod = lowered({"data_alignment": 128, "offset_factor": 8})
    f = mod["default_function"]
    for buf in f.buffer_map.values():
        assert buf.data_alignment == 128 and buf.offset_factor == 8
        assert isinstance(buf.elem_offset, loom.ir.Var)
    checks = [a.message.value for a in collect(f.body, lambda n: isinstance(n, AssertStmt))]
    assert sorted(checks) == [f"buffer {x}: elem_offset must be a multiple of offset_factor 8" for x in "ABC"]


def test_default_buffers_are_aligned_and_offset_free():
    f = lowered()["default_function"]
    for buf in f.buffer_map.values():
        assert buf.data_alignment == 64 and buf.offset_factor == 1 and int(buf.elem_offset) == 0
    assert count(f.body, AssertStmt) == 0


@pytest.mark.parametrize("restricted", [True, False])
def test_restricted_func_sets_noalias(restricted):
    assert lowered({"restricted_func": restricted})["default_function"].attrs["tir.noalias"] is restricted


def test_instrument_bound_checkers_adds_asserts():
    mod = lowered({"instrument_bound_checkers": True})
    messages = [a.message.value for a in collect(body(mod), lambda n: isinstance(n, AssertStmt))]
    assert messages and all("out-of-bounds access to buffer" in m for m in messages)
    run_vadd(mod)


def _double_buffered():
    A = placeholder((8,), "float32", name="A")
    B = compute((8,), lambda i: A[i] * 2.0, name="B")
    C = compute((8,), lambda i: B[i] + 1.0, name="C")
    s = create_schedule(C.op)
    xo, _ = s[C].split(C.op.axis[0], factor=2)
    s[B].compute_at(s[C], xo)
    s[B].double_buffer()
    return s, [A, C]


@pytest.mark.parametrize("split", [0, 2])
def test_double_buffer_split_loop(split):
    s, args = _double_buffered()
    with build_config(double_buffer_split_loop=split):
        mod = lower(s, args)
    # Split by 2 and unrolled, the buffer halves are constants and the guard is gone.
    assert (count(body(mod), FloorMod) > 0) == (split == 0)
    assert (count(body(mod), IfThenElse) > 0) == (split == 0)
    a, c = np.arange(8, dtype="float32"), np.zeros(8, "float32")
    loom.testing.evaluate(mod["default_function"], a, c)
    np.testing.assert_allclose(c, a * 2 + 1)


def test_add_lower_pass_phases_see_the_classic_points():
    seen = []

    def phase(k):
        def look(stmt):
            seen.append((k, count(stmt, ProducerStore), count(stmt, BufferStore), count(stmt, For)))
            return stmt

        return look

    def api_check(func, mod, ctx):
        seen.append(("3-pass", "loom.api" in func.attrs))
        return func

    s, args = vadd()
    passes = [(3, phase(3)), (2, phase(2)), (1, phase(1)), (0, phase(0)),
              (3, PrimFuncPass(api_check, PassInfo("ApiCheck")))]
    with build_config(add_lower_pass=passes, auto_unroll_max_step=16):
        mod = lower(s, args)
    # Phase 0 sees the tensor-level IR, phase 1 the flattened one, phase 2 the unrolled one;
    # phase-3 passes run before MakeAPI.
    assert seen == [(0, 1, 0, 2), (1, 0, 1, 2), (2, 0, 12, 0), (3, 0, 10, 0), ("3-pass", False)]
    assert mod["default_function"].attrs["loom.api"] is True


def test_dump_pass_ir_writes_each_pass_to_a_numbered_file(tmp_path):
    s, args = vadd()
    with build_config(dump_pass_ir=True, dump_pass_ir_dir=str(tmp_path)):
        mod = lower(s, args)
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names == ["00_InjectPrefetch.txt", "01_StorageFlatten.txt", "02_CanonicalSimplify.txt",
                     "03_EntryAccessChecks.txt", "04_LoopPartition.txt", "05_VectorizeLoop.txt",
                     "06_InjectVirtualThread.txt", "07_InjectDoubleBuffer.txt", "08_StorageRewrite.txt",
                     "09_UnrollLoop.txt", "10_Simplify.txt", "11_RemoveNoOp.txt", "12_RewriteUnsafeSelect.txt",
                     "13_MakeAPI.txt"]
    assert (tmp_path / "13_MakeAPI.txt").read_text().strip() == str(mod).strip()


def test_lower_runs_the_pipeline_on_a_prim_func():
    A = loom.decl_buffer((4,), "int32", name="A")
    i = loom.var("i")
    f = loom.ir.PrimFunc([A.data], For(i, 0, 4, "serial", BufferStore(A, i * 2, [i])), buffer_map={A.data: A})
    with build_config(auto_unroll_max_step=8):
        mod = lower(f, name="twice")
    assert mod["twice"].attrs["loom.api"] is True and count(body(mod, "twice"), For) == 0
    a = np.zeros(4, "int32")
    loom.testing.evaluate(mod["twice"], a)
    np.testing.assert_array_equal(a, [0, 2, 4, 6])


def test_build_for_interp_runs_the_program():
    s, args = vadd()
    f = build(s, args, target="interp")
    a, b, c = np.arange(10, dtype="float32"), np.ones(10, "float32"), np.zeros(10, "float32")
    f(a, b, c)
    np.testing.assert_allclose(c, a + 1)
    assert f.imported_modules == []


def test_build_for_a_device_splits_kernels_into_an_imported_module(fake_backend):
    A = placeholder((16,), "float32", name="A")
    B = compute((16,), lambda i: A[i] * 2.0, name="B")
    s = create_schedule(B.op)
    bx, tx = s[B].split(B.op.axis[0], factor=4)
    s[B].bind(bx, thread_axis("blockIdx.x"))
    s[B].bind(tx, thread_axis("threadIdx.x"))
    host = build(s, [A, B], target="fakegpu", target_host="fakecpu")
    assert host.target.kind_name == "fakecpu"
    [dev] = host.imported_modules
    [kernel] = dev.mod.functions.values()
    assert kernel.attrs["calling_conv"] == "device_kernel" and kernel.attrs["target"].kind_name == "fakegpu"
    assert host.mod["default_function"].attrs["target"].kind_name == "fakecpu"
    assert count(host.mod["default_function"].body, loom.ir.AttrStmt) == 0  # no thread scope left on the host
    # The host calls the kernel by name; linking hands it the device module that defines it.
    assert host.imports == ("default_function_kernel0",) and host.links == {"default_function_kernel0": dev}
    # Its buffer arguments live on the device (PlanDeviceMemory).
    assert tuple(host.mod["default_function"].attrs["loom.arg_devices"]) == (2, 2)


def _global_exchange_kernel():
    """Each thread writes B[i], then reads another thread's B[15 - i]: a global-memory exchange."""
    A, B, C = (loom.decl_buffer((16,), "float32", name=n) for n in "ABC")
    bx = loom.ir.IterVar(None, loom.var("bx"), "thread_index", "blockIdx.x")
    tx = loom.ir.IterVar(None, loom.var("tx"), "thread_index", "threadIdx.x")
    i = bx.var * 4 + tx.var
    inner = loom.ir.seq(BufferStore(B, A[i], [i]), BufferStore(C, B[15 - i], [i]))
    body = loom.ir.AttrStmt(bx, "thread_extent", 4, loom.ir.AttrStmt(tx, "thread_extent", 4, inner))
    params = [A.data, B.data, C.data]
    return loom.ir.PrimFunc(params, body, buffer_map={b.data: b for b in (A, B, C)},
                            attrs={"global_symbol": "exchange", "loom.api": True})


@pytest.mark.parametrize("detect", [True, False])
def test_detect_global_barrier_inserts_a_global_sync_in_kernels(fake_backend, detect):
    with build_config(detect_global_barrier=detect):
        host = build(_global_exchange_kernel(), target="fakegpu", target_host="fakecpu")
    [dev] = host.imported_modules
    [kernel] = dev.mod.functions.values()
    syncs = collect(kernel.body, lambda n: isinstance(n, loom.ir.Call) and getattr(n.op, "name", "") ==
                    "tir.tvm_storage_sync")
    assert [s.args[0].value for s in syncs] == (["global"] if detect else [])
