"""Tutorial "Intrinsics and Math Functions": extern math calls, ``loom.exp`` lowered per target, a rule
overriding ``exp`` on CUDA, and a new intrinsic ``mylog`` added through its lowering rules.

The CUDA parts compare generated source (no GPU needed; nvcc compiles it); the same programs run on
llvm, c and the interpreter against numpy.  TVM's tutorial also builds for OpenCL, which Loom has no
backend for: that build is a clear TargetError here.
"""

import contextlib

import numpy as np
import pytest

import loom
from loom.ir import Op

try:
    from loom_cuda.nvcc import find_nvcc
except ImportError:  # the CUDA plugin is not installed
    find_nvcc = None  # type: ignore[assignment]

needs_nvcc = pytest.mark.skipif(find_nvcc is None or find_nvcc() is None, reason="no CUDA plugin or nvcc")
N = 1000


def _gpu_schedule(B):
    s = loom.create_schedule(B.op)
    bx, tx = s[B].split(B.op.axis[0], factor=64)
    s[B].bind(bx, loom.thread_axis("blockIdx.x"))
    s[B].bind(tx, loom.thread_axis("threadIdx.x"))
    return s


def _run(s, A, B, target, a, **kw):
    f = loom.build(s, [A, B], target, name="mathfunc", **kw)
    b = np.zeros_like(a)
    f(a, b)
    return b


def _cuda_source(s, A, B):
    return loom.build(s, [A, B], "cuda", name="mathfunc").imported_modules[0].get_source()


@contextlib.contextmanager
def _rules_restored(op_name):
    """Rules registered for ``op_name`` inside the block are removed after it (the registry is process-wide)."""
    info = Op.get(op_name).info
    before = dict(info.lowering)
    try:
        yield
    finally:
        info.lowering.clear()
        info.lowering.update(before)


@pytest.fixture
def exp_rules():
    with _rules_restored("tir.exp"):
        yield


def _exp_program(body):
    n = loom.var("n")
    A = loom.placeholder((n,), name="A")
    B = loom.compute(A.shape, lambda i: body(A[i]), name="B")
    return A, B, _gpu_schedule(B)


@needs_nvcc
def test_a_direct_extern_call_reaches_the_cuda_source():
    A, B, s = _exp_program(lambda x: loom.call_pure_extern("float32", "__expf", x))
    assert "__expf(A[" in _cuda_source(s, A, B)


def test_the_exp_intrinsic_runs_on_every_cpu_target():
    A, B, s = _exp_program(loom.exp)
    a = np.random.default_rng(0).uniform(-3, 3, N).astype("float32")
    for target in ("llvm", "c", "interp"):
        np.testing.assert_allclose(_run(s, A, B, target, a), np.exp(a), rtol=1e-6)


@needs_nvcc
def test_the_exp_intrinsic_becomes_cuda_math():
    A, B, s = _exp_program(loom.exp)
    assert "expf(A[" in _cuda_source(s, A, B)


def test_opencl_is_not_a_loom_target():
    A, B, s = _exp_program(loom.exp)
    with pytest.raises(loom.TargetError, match="opencl"):
        loom.build(s, [A, B], "opencl", name="myexp")


def my_math_rule(op):
    """The tutorial's rule, word for word: exp -> expf for float32, the double function for float64."""
    assert isinstance(op, loom.ir.Call)
    if op.dtype == "float32":
        return loom.call_pure_extern("float32", "%sf" % op.name, op.args[0])
    elif op.dtype == "float64":
        return loom.call_pure_extern("float64", op.name, op.args[0])
    return op


def test_a_custom_exp_rule_overrides_the_backends_own(exp_rules):
    seen = []

    def rule(op):
        seen.append(op.name)
        return my_math_rule(op)

    A, B, s = _exp_program(loom.exp)
    loom.register_intrin_rule("llvm", "exp", rule, override=True)
    a = np.random.default_rng(1).uniform(-3, 3, N).astype("float32")
    np.testing.assert_allclose(_run(s, A, B, "llvm", a), np.exp(a), rtol=1e-6)
    assert seen and set(seen) == {"exp"}  # once per call in the lowered code (the guarded tail repeats it)

    # A second registration without override is refused; with it, the newer rule wins.
    with pytest.raises(loom.LoomError, match="already has a lowering rule"):
        loom.register_intrin_rule("llvm", "exp", rule)
    loom.register_intrin_rule("llvm", "exp", lambda op: loom.call_pure_extern("float32", "exp2f", op.args[0]),
                              override=True)
    np.testing.assert_allclose(_run(s, A, B, "llvm", a), np.exp2(a), rtol=1e-6)


@needs_nvcc
def test_a_custom_exp_rule_on_cuda(exp_rules):
    A, B, s = _exp_program(loom.exp)
    loom.register_intrin_rule("cuda", "exp", lambda op: loom.call_pure_extern("float32", "__expf", op.args[0]),
                              override=True)
    assert "__expf(A[" in _cuda_source(s, A, B)
    loom.register_intrin_rule("cuda", "exp", my_math_rule, override=True)
    src = _cuda_source(s, A, B)
    assert "expf(A[" in src and "__expf" not in src


def mylog(x):
    """The tutorial's own intrinsic."""
    return loom.call_pure_intrin(x.dtype, "mylog", x)


def my_mylog_rule(op):
    if op.dtype == "float32":
        return loom.call_pure_extern("float32", "logf", op.args[0])
    elif op.dtype == "float64":
        return loom.call_pure_extern("float64", "log", op.args[0])
    return op


def _mylog_program():
    for kind in ("cuda", "llvm", "c"):
        loom.register_intrin_rule(kind, "mylog", my_mylog_rule, override=True)
    # The interpreter runs no C library: its rule lowers to the built-in intrinsic.
    loom.register_intrin_rule("interp", "mylog", lambda op: loom.log(op.args[0]), override=True)
    n = loom.var("n")
    A = loom.placeholder((n,), name="A")
    B = loom.compute(A.shape, lambda i: mylog(A[i]), name="B")
    return A, B, _gpu_schedule(B)


def test_a_new_intrinsic_runs_through_its_rules():
    A, B, s = _mylog_program()
    call = B.op.body[0]
    assert call.op.name == "tir.mylog" and call.name == "mylog"
    a = np.random.default_rng(2).uniform(0.5, 4, N).astype("float32")
    for target in ("llvm", "c", "interp"):
        np.testing.assert_allclose(_run(s, A, B, target, a), np.log(a), rtol=1e-6)


@needs_nvcc
def test_a_new_intrinsic_in_cuda_source():
    A, B, s = _mylog_program()
    assert "logf(A[" in _cuda_source(s, A, B)


def test_a_new_intrinsic_without_a_rule_for_the_target_is_an_error():
    loom.register_intrin_rule("c", "mylog_c_only", my_mylog_rule, override=True)
    A = loom.placeholder((8,), name="A")
    B = loom.compute(A.shape, lambda i: loom.call_pure_intrin("float32", "mylog_c_only", A[i]), name="B")
    s = loom.create_schedule(B.op)
    a = np.arange(1, 9, dtype="float32")
    np.testing.assert_allclose(_run(s, A, B, "c", a), np.log(a), rtol=1e-6)
    with pytest.raises(loom.LoomError, match="mylog_c_only"):
        _run(s, A, B, "interp", a)
    with pytest.raises(loom.LoomError, match="mylog_c_only"):
        _run(s, A, B, "llvm", a)


def test_register_intrin_rule_checks_its_target_and_is_a_decorator():
    with pytest.raises(loom.LoomValueError, match="unknown target kind 'cdua'"):
        loom.register_intrin_rule("cdua", "exp", my_math_rule)

    @loom.register_intrin_rule(loom.Target("c"), "mylog_decorated", override=True)
    def rule(op):
        return loom.call_pure_extern(op.dtype, "log1pf", op.args[0])

    assert Op.get("mylog_decorated").info.lowering["c"] is rule
    A = loom.placeholder((8,), name="A")
    B = loom.compute(A.shape, lambda i: loom.call_pure_intrin("float32", "mylog_decorated", A[i]), name="B")
    a = np.linspace(0, 1, 8, dtype="float32")
    np.testing.assert_allclose(_run(loom.create_schedule(B.op), A, B, "c", a), np.log1p(a), rtol=1e-6)


def test_a_classic_intrinsic_name_reaches_the_op_call_intrin_builds():
    A = loom.placeholder((4,), name="A")
    B = loom.compute(A.shape, lambda i: loom.call_pure_intrin("float32", "pow", A[i], 2.0), name="B")
    s = loom.create_schedule(B.op)
    with _rules_restored("tir.power"):
        # A rule that does not compute pow, so the result shows it ran.
        loom.register_intrin_rule("c", "pow", lambda op: op.args[0] + op.args[1], override=True)
        assert "tir.pow" not in loom.ir.list_ops()
        a = np.array([1, 2, 3, 4], "float32")
        np.testing.assert_allclose(_run(s, A, B, "c", a), a + 2)


def test_call_name_is_the_classic_callee_name():
    x = loom.var("x", "float32")
    assert loom.exp(x).name == "exp" and loom.exp(x).op.name == "tir.exp"
    assert loom.call_pure_extern("float32", "expf", x).name == "expf"
    assert loom.call_extern("int32", "TestA", 1).name == "TestA"
    assert loom.if_then_else(x > 0, x, 0.0).name == "if_then_else"
