"""Special memory (tagged scopes such as ``local.L0A``): StorageRewrite packs its buffers into one
allocation at aligned offsets and checks the capacity a registered MemoryInfo gives."""

import numpy as np
import pytest

import loom
from loom.ir import Allocate, PrimFunc, collect
from loom.runtime.registry import register_func, remove_global_func
from loom.target.memory_info import MemoryInfo, memory_info, special_memory
from loom.te.bound import storage_rank
from loom.testing import evaluate
from loom.transform.storage_rewrite import storage_rewrite

SCOPE = "local.pk"


@pytest.fixture
def mem_info():
    """Registers ``loom.info.mem.<scope>`` for the test, and removes it after."""
    names = set()

    def register(scope, name_prefix="loom.info.mem.", **fields):
        name = name_prefix + scope
        register_func(name, lambda: MemoryInfo(**fields), override=True)
        names.add(name)

    yield register
    for name in names:
        remove_global_func(name)


def program(scope=SCOPE, sizes=(16, 16, 8)):
    """Three buffers of the scope (float32, int16, float64), all live at once, then Y from them."""
    A = loom.decl_buffer((16,), "float32", name="A")
    Y = loom.decl_buffer((16,), "float32", name="Y")
    ib = loom.ir_builder.create()
    a, y = ib.buffer_ptr(A), ib.buffer_ptr(Y)
    with ib.for_range(0, 2, name="r") as r:
        T = ib.allocate("float32", sizes[0], name="T", scope=scope)
        U = ib.allocate("int16", sizes[1], name="U", scope=scope)
        W = ib.allocate("float64", sizes[2], name="W", scope=scope)
        with ib.for_range(0, 16, name="i") as i:
            T[i] = a[i] * 2.0 + r.astype("float32")
        with ib.for_range(0, 16, name="i") as i:
            U[i] = a[i].astype("int16") + 1
        with ib.for_range(0, 8, name="i") as i:
            W[i] = (T[i + 8] - U[15 - i].astype("float32")).astype("float64")
        with ib.for_range(0, 8, name="i") as i:
            y[i + r * 8] = W[7 - i].astype("float32") + T[i]
    return PrimFunc([A.data, Y.data], ib.get(), buffer_map={A.data: A, Y.data: Y})


def expected(a):
    y = np.zeros(16, "float32")
    for r in range(2):
        t = a * 2 + r
        u = a.astype("int16") + 1
        w = (t[8:] - u[::-1][:8]).astype("float64")
        y[r * 8:r * 8 + 8] = w[::-1].astype("float32") + t[:8]
    return y


def run(f):
    a = np.arange(16, dtype="float32") * 1.5
    y = np.zeros(16, "float32")
    evaluate(f, a, y)
    return y


def rewritten(f):
    return f.with_(body=storage_rewrite(f.body))


def test_buffers_of_a_special_scope_are_packed_at_offsets():
    f = program()
    after = rewritten(f)
    (alloc,) = collect(after.body, lambda n: isinstance(n, Allocate))
    # T: bits [0, 512), U: [512, 768), W: [768, 1280) (64-bit aligned): 40 float32 elements.
    assert (alloc.scope, str(alloc.dtype), [int(e) for e in alloc.extents]) == (SCOPE, "float32", [40])
    offsets = {b.name: int(b.elem_offset) for b in collect(after.body, lambda n: isinstance(n, loom.ir.Buffer))
               if b.data is alloc.buffer_var}
    assert offsets == {"T": 0, "U": 512 // 16, "W": 768 // 64}
    loom.verify_well_formed(after)
    np.testing.assert_array_equal(run(after), run(f))
    np.testing.assert_array_equal(run(after), expected(np.arange(16, dtype="float32") * 1.5))


def test_memory_info_aligns_each_buffer(mem_info):
    mem_info(SCOPE, unit_bits=16, max_simd_bits=384, max_num_bits=1 << 20)
    after = rewritten(program())
    (alloc,) = collect(after.body, lambda n: isinstance(n, Allocate))
    offsets = {b.name: int(b.elem_offset) * b.dtype.bits for b in collect(after.body, lambda n: isinstance(n, loom.ir.Buffer))
               if b.data is alloc.buffer_var}
    # U starts at 512 rounded up to 384 bits, W at 1024 rounded up to lcm(384, 64); the end to 384.
    assert offsets == {"T": 0, "U": 768, "W": 1152}
    assert int(alloc.extents[0]) == 1920 // 32
    np.testing.assert_array_equal(run(after), run(program()))


def test_buffers_with_disjoint_lives_share_inside_the_packing():
    ib = loom.ir_builder.create()
    Y = loom.decl_buffer((4,), "int16", name="Y")
    y = ib.buffer_ptr(Y)
    with ib.for_range(0, 3, name="r"):
        A = ib.allocate("int16", 200, name="A", scope=SCOPE)
        B = ib.allocate("int16", 200, name="B", scope=SCOPE)
        A[0], B[0] = loom.const(1, "int16"), loom.const(2, "int16")
        y[1] = A[0] + B[0]
        C = ib.allocate("int16", 400, name="C", scope=SCOPE)  # A and B are dead: C takes A's memory, grown
        C[0] = loom.const(3, "int16")
        y[0] = C[0]
    after = storage_rewrite(ib.get())
    (alloc,) = collect(after, lambda n: isinstance(n, Allocate))
    assert int(alloc.extents[0]) == 400 + 200


def test_capacity_of_the_memory_is_checked(mem_info):
    mem_info(SCOPE, unit_bits=16, max_simd_bits=32, max_num_bits=1279)
    with pytest.raises(loom.LoomError, match=r"'local.pk' \(T, U, W\) need 1280 bits, more than .* 1279"):
        storage_rewrite(program().body)
    mem_info(SCOPE, unit_bits=16, max_simd_bits=32, max_num_bits=1280)
    storage_rewrite(program().body)


def test_one_buffer_alone_is_checked_too(mem_info):
    mem_info("local.one", unit_bits=8, max_simd_bits=8, max_num_bits=100)
    ib = loom.ir_builder.create()
    T = ib.allocate("int8", 13, name="T", scope="local.one")
    T[0] = loom.const(1, "int8")
    with pytest.raises(loom.LoomError, match="need 104 bits"):
        storage_rewrite(ib.get())


def test_capacity_error_stops_the_build(mem_info):
    mem_info("global:wgt", unit_bits=8, max_simd_bits=8, max_num_bits=64)
    A = loom.placeholder((16,), name="A")
    B = loom.compute((16,), lambda i: A[i] + 1, name="B")
    C = loom.compute((16,), lambda i: B[i] * 2, name="C")
    s = loom.create_schedule(C.op)
    s[B].set_scope("global:wgt")
    with pytest.raises(loom.LoomError, match="global:wgt.*need 512 bits"):
        loom.build(s, [A, C], target="llvm")


def test_tvm_spelling_of_the_info_function(mem_info):
    mem_info("local.tv", name_prefix="tvm.info.mem.", unit_bits=16, max_simd_bits=32, max_num_bits=64)
    assert memory_info("local.tv").max_num_bits == 64
    assert memory_info("local.unregistered") is None


def test_info_function_must_return_memory_info():
    register_func("loom.info.mem.local.bad", lambda: 42, override=True)
    try:
        with pytest.raises(loom.LoomError, match="must return a MemoryInfo, got int"):
            memory_info("local.bad")
    finally:
        remove_global_func("loom.info.mem.local.bad")
    with pytest.raises(loom.LoomError, match="max_num_bits must be a positive"):
        MemoryInfo(unit_bits=8, max_simd_bits=8, max_num_bits=0)


def test_memory_info_is_a_node():
    info = loom.ir.make_node("MemoryInfo", unit_bits=16, max_simd_bits=32, max_num_bits=1024, head_address=None)
    assert loom.structural_equal(loom.load_json(loom.save_json(info)), info)


def test_special_buffers_need_constant_sizes():
    ib = loom.ir_builder.create()
    n = loom.var("n")
    T = ib.allocate("float32", n, name="T", scope=SCOPE)
    T[0] = 1.0
    with pytest.raises(loom.LoomError, match=r"T in the special memory 'local.pk' has the extents \(n\)"):
        storage_rewrite(ib.get())


def test_an_escaping_pointer_stays_at_offset_zero():
    ib = loom.ir_builder.create()
    P = ib.allocate("float32", 4, name="P", scope=SCOPE)
    Q = ib.allocate("float32", 4, name="Q", scope=SCOPE)
    R = ib.allocate("float32", 4, name="R", scope=SCOPE)
    Q[0] = 1.0
    ib.emit(loom.call_extern("int32", "use", P.asnode(), R.asnode()))
    Q[1] = Q[0]
    after = storage_rewrite(ib.get())
    allocs = collect(after, lambda n: isinstance(n, Allocate))
    # P heads the packing (Q after it); R escapes too, so it keeps an allocation of its own.
    assert sorted((a.buffer_var.name, int(a.extents[0])) for a in allocs) == [("P", 8), ("R", 4)]


def test_tagged_scopes():
    assert special_memory("local.L0A") and special_memory("global:tag") and special_memory("local_TB2")
    assert not any(special_memory(s) for s in ("local", "global", "shared", "shared.dyn", "local.fragment", "wmma"))
    assert [storage_rank(s) for s in ("global:w", "shared.x", "warp", "local_TB2")] == [0, 1, 2, 3]
