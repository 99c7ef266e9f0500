"""LLVMModule: ``loom.build(..., target="llvm")`` end to end, compared with numpy."""

from __future__ import annotations

import re
import textwrap

import numpy as np
import pytest

pytest.importorskip("llvmlite")

import loom  # noqa: E402
from loom.ir import AssertStmt, BufferStore, For, IRModule, PrimFunc  # noqa: E402
from loom.runtime.arguments import ArgumentTypeError, ArgumentValueError  # noqa: E402
from loom.testing import AssertionFailed  # noqa: E402
from loom_llvm import plugin  # noqa: E402
from loom_llvm.runtime import LLVMModule  # noqa: E402
from llvm_programs import run_python  # noqa: E402
from programs import blocked_matmul  # noqa: E402


@pytest.fixture(scope="module")
def vadd():
    n = loom.var("n")
    A, B = loom.placeholder((n,), name="A"), loom.placeholder((n,), name="B")
    C = loom.compute((n,), lambda i: A[i] + B[i] * 2.0, name="C")
    s = loom.create_schedule(C.op)
    outer, inner = s[C].split(C.op.axis[0], factor=8)
    s[C].vectorize(inner)
    s[C].parallel(outer)
    with loom.build_config(partition_const_loop=True):
        return loom.build(s, [A, B, C], target="llvm", name="vadd")


def test_build_returns_llvm_module_with_entry(vadd):
    assert isinstance(vadd, LLVMModule)
    assert vadd.entry_name == "vadd" and vadd.function_names == ["vadd"]
    assert vadd["vadd"] is vadd.get_function("vadd")
    assert str(vadd.target).startswith("llvm")


@pytest.mark.parametrize("partition", [False, True])
def test_tiled_parallel_vectorized_matmul_matches_numpy(partition):
    M, N, K = 13, 17, 19
    s, args = blocked_matmul(M, N, K)
    with loom.build_config(partition_const_loop=partition):
        f = loom.build(s, args, target="llvm", name="matmul")
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((M, K)).astype("float32"), rng.standard_normal((K, N)).astype("float32")
    c = np.full((M, N), np.nan, "float32")
    f(a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-5, atol=1e-5)


def test_callable_many_times_with_changing_symbolic_shapes(vadd):
    rng = np.random.default_rng(1)
    for size in [1, 7, 8, 9, 64, 203, 3, 1000] * 25:
        a, b = rng.standard_normal(size).astype("float32"), rng.standard_normal(size).astype("float32")
        c = np.zeros(size, "float32")
        vadd(a, b, c)
        np.testing.assert_array_equal(c, a + b * np.float32(2.0))


def test_misaligned_views_are_read_and_written_back(vadd):
    base = np.arange(40, dtype="float32")
    a, b = base[1:34], base[2:35]  # 4 and 8 bytes past a 64-byte boundary at best
    out = np.zeros(41, "float32")
    c = out[3:36]
    vadd(a, b, c)
    np.testing.assert_array_equal(c, a + 2 * b)
    assert not out[:3].any() and not out[36:].any()


def test_scalar_parameters_and_int_arithmetic():
    n = loom.var("n")
    x = loom.var("x", "int32")
    A = loom.placeholder((n,), "int32", name="A")
    B = loom.compute((n,), lambda i: loom.floordiv(A[i], 3) * x + loom.floormod(A[i], 3), name="B")
    f = loom.build(loom.create_schedule(B.op), [A, x, B], target="llvm", name="affine")
    a = np.arange(-20, 20, dtype="int32")
    b = np.zeros_like(a)
    f(a, np.int32(-7), b)
    np.testing.assert_array_equal(b, (a // 3) * -7 + a % 3)


def _guarded():
    A = loom.decl_buffer((4,), "float32", name="A")
    i = loom.var("i")
    body = AssertStmt(A[0] > loom.const(0.0, "float32"), "A[0] must be positive",
                      For(i, 0, 4, "serial", BufferStore(A, A[i] + 1.0, [i])))
    return PrimFunc([A.data], body, buffer_map={A.data: A}, attrs={"global_symbol": "guarded"})


def test_failing_assert_raises_with_its_message():
    f = loom.build(_guarded(), target="llvm")
    ok = np.ones(4, "float32")
    f(ok)
    np.testing.assert_array_equal(ok, 2.0)
    bad = np.array([-1, 5, 5, 5], "float32")
    with pytest.raises(AssertionFailed, match="A\\[0\\] must be positive") as info:
        f(bad)
    assert info.value.function == "guarded" and isinstance(info.value, loom.LoomError)
    np.testing.assert_array_equal(bad, [-1, 5, 5, 5])  # the assert ran before any store
    f(ok)  # a failed call leaves the module usable
    np.testing.assert_array_equal(ok, 3.0)


def test_bad_arguments_raise_before_touching_memory(vadd):
    a, b = np.ones(16, "float32"), np.ones(16, "float32")
    c = np.full(16, 5.0, "float32")
    bad_calls = [
        ((a, b), ArgumentTypeError),                                # too few
        ((a, b, c, c), ArgumentTypeError),                          # too many
        ((a, b, c.astype("float64")), ArgumentTypeError),           # dtype
        ((a, b[:8], c), ArgumentValueError),                        # n bound inconsistently
        ((a, b, np.full((4, 4), 5.0, "float32")), ArgumentValueError),  # ndim
        ((a, b, np.full(32, 5.0, "float32")[::2]), ArgumentValueError),  # strided, not compact
        ((a, "b", c), ArgumentTypeError),                           # not an array
    ]
    for args, err in bad_calls:
        with pytest.raises(err, match="vadd"):
            vadd(*args)
        assert isinstance(err, type) and issubclass(err, loom.LoomError)
    np.testing.assert_array_equal(c, 5.0)
    np.testing.assert_array_equal(a, 1.0)


def test_get_source_formats(vadd):
    ll = vadd.get_source("ll")
    assert vadd.get_source() == ll
    assert re.search(r"define .*i32 @\"?vadd\"?\(", ll)
    assert not re.search(r"define .*@\"?vadd\.compute", ll)  # optimized: inlined into the ABI entry
    raw = vadd.get_source("ll-raw")
    assert "vadd.compute" in raw and "alwaysinline" in raw
    asm = vadd.get_source("asm")
    assert "vadd:" in asm and "ret" in asm
    with pytest.raises(loom.LoomError, match="'asm'"):
        vadd.get_source("ptx")


def test_plugin_backend_answers_only_for_llvm():
    from loom.backend import build_module
    from loom_llvm.runtime import LLVMBackend

    assert plugin.loom_backend(target_kind="interp") is None
    assert isinstance(plugin.loom_backend(target_kind="llvm"), LLVMBackend)
    built = build_module(IRModule({"guarded": _guarded()}), loom.target.Target("llvm"))
    assert isinstance(built, LLVMModule) and built.entry_name == "guarded"
    assert built.info.kind == "llvm" and built.get_source("ll-raw") == built.info.sources["ll"]


def test_a_corrupt_artifact_is_a_clear_error():
    from loom.backend import ModuleInfo
    from loom_llvm.runtime import LLVMBackend

    info = ModuleInfo("llvm", str(loom.target.Target("llvm")), "guarded", {"guarded": _guarded()})
    with pytest.raises(loom.errors.SerializationError, match="not a Loom sections artifact"):
        LLVMBackend().load(b"\x7fELF garbage", info)


def test_call_of_an_undefined_function_is_an_error_not_a_crash():
    """MCJIT links an unknown symbol to nothing callable (a crash on the first call); the build reports it."""
    from llvm_programs import run_python

    code = ("import loom\n"
            "A = loom.placeholder((4,), 'int32', name='A')\n"
            "B = loom.compute((4,), lambda i: loom.call_extern('int32', 'loom_no_such_fn') + A[i], name='B')\n"
            "try:\n"
            "    loom.build(loom.create_schedule(B.op), [A, B], target='llvm')\n"
            "except loom.LoomError as err:\n"
            "    print(err)\n")
    assert "does not define: ['loom_no_such_fn']" in run_python(code)


def test_libm_functions_resolve_in_a_fresh_process():
    # tanhf has no LLVM lowering: it is a libm call, which the JIT must find even when
    # nothing else in the process has loaded libm's symbols for it.
    out = run_python(textwrap.dedent("""
        import numpy as np, loom
        A = loom.placeholder((8,), name="A")
        B = loom.compute((8,), lambda i: loom.tanh(A[i]) + loom.power(A[i], 2.0), name="B")
        f = loom.build(loom.create_schedule(B.op), [A, B], target="llvm")
        a = np.linspace(-2, 2, 8).astype("float32"); b = np.zeros(8, "float32"); f(a, b)
        print(np.allclose(b, np.tanh(a) + a ** 2, rtol=1e-5))
    """))
    assert out.split() == ["True"]
