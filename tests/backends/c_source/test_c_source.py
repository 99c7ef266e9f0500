"""The C text itself: golden key lines, names, dialect tables, and compiler errors."""

from __future__ import annotations

import numpy as np
import pytest

import loom
from loom.codegen import CodegenError, CStyleRenderer, Release, sanitize
from loom.ir import expr as E
from loom.ir import stmt as S
from loom.ir.function import PrimFunc
from loom_c.cc import CompileError, compile_source
from loom.runtime import abi
from loom_c.codegen import CRenderer, generate


def saxpy(noalias: bool = True) -> PrimFunc:
    n = loom.var("n")
    A = loom.decl_buffer((n,), "float32", name="A")
    B = loom.decl_buffer((n,), "float32", name="B")
    a, i = loom.var("alpha", "float32"), loom.var("i")
    body = S.For(i, 0, n, "parallel", S.BufferStore(B, a * A[i] + B[i], [i]))
    return PrimFunc([A.data, B.data, a], body, buffer_map={A.data: A, B.data: B},
                    attrs={"tir.noalias": True} if noalias else {})


def lines(text: str) -> list[str]:
    return [line.strip() for line in text.splitlines()]


def test_golden_saxpy() -> None:
    """Arguments unpack in ABI order with restrict and alignment; the loop is an OpenMP loop."""
    text = generate(saxpy(), openmp=True, name="saxpy").text
    body = lines(text[text.index("int32_t saxpy("):])
    assert body[:9] == [
        "int32_t saxpy(const uint64_t *args, const char **error) {",
        "float * restrict A = (float *)__builtin_assume_aligned((void *)(uintptr_t)args[0], 16);",
        "float * restrict B = (float *)__builtin_assume_aligned((void *)(uintptr_t)args[1], 16);",
        "const float alpha = (float)loom_f64_of_bits(args[2]);",
        "const int32_t n = (int32_t)args[3];",
        "(void)error;",
        # At most one thread per 32768 iterations of one store each (loom.codegen.parallel_work).
        "#pragma omp parallel for schedule(static) num_threads(loom_thread_count((int64_t)(n), 32768))",
        "for (int32_t i = 0; i < n; ++i) {",
        "B[i] = ((alpha * A[i]) + B[i]);",
    ]
    assert body[9:] == ["}", "return 0;", "}"]
    head = lines(text[:text.index("int32_t saxpy(")])
    assert '__attribute__((visibility("default"))) int32_t loom_num_threads = 0;' in head
    assert "static inline int loom_thread_count(int64_t extent, int64_t min_iterations) {" in head
    assert "int64_t t = loom_num_threads > 0 ? loom_num_threads : omp_get_max_threads();" in head


def test_golden_without_openmp_or_noalias() -> None:
    text = generate(saxpy(noalias=False), openmp=False, name="saxpy").text
    assert "#pragma omp" not in text and "restrict" not in text and "omp_get_max_threads" not in text
    assert '__attribute__((visibility("default"))) int32_t loom_num_threads = 0;' in lines(text)
    assert "float *A = (float *)__builtin_assume_aligned((void *)(uintptr_t)args[0], 16);" in lines(text)


def test_golden_vector_and_assert_lines() -> None:
    A = loom.decl_buffer((16,), "int8", name="A")
    n = loom.var("n")
    ramp = E.Ramp(loom.const(0), loom.const(1), 16)
    store = S.BufferStore(A, E.BufferLoad(A, [ramp]) + E.Broadcast(loom.const(1, "int8"), 16), [ramp])
    f = PrimFunc([A.data, n], S.AssertStmt(n > 0, "n > 0 expected", store), buffer_map={A.data: A})
    text = generate(f, name="inc").text
    assert "typedef int8_t int8x16 __attribute__((vector_size(16)));" in text
    assert 'if (!((n > 0))) { *error = "n > 0 expected"; return -1; }' in lines(text)
    assert "memcpy(&A[0], &_t" in text


def test_names_are_sanitised_and_unique() -> None:
    """IR names become C identifiers; two variables named alike get suffixes."""
    assert [sanitize(x) for x in ("i.outer", "3d", "int", "_x", "a-b")] == ["i_outer", "v_3d", "v_int", "v_x", "a_b"]
    A = loom.decl_buffer((4, 4), "float32", name="A")
    i1, i2 = loom.var("i.inner"), loom.var("i.inner")
    body = S.For(i1, 0, 4, "serial", S.For(i2, 0, 4, "unrolled", S.BufferStore(A, 0.0, [i1, i2])))
    text = generate(PrimFunc([A.data], body, buffer_map={A.data: A}), name="zero").text
    assert "for (int32_t i_inner = 0; i_inner < 4; ++i_inner) {" in lines(text)
    assert "#pragma GCC unroll 4" in lines(text)
    assert "A[i_inner * 4 + i_inner_1] = 0.0f;" in lines(text)


def test_rendering_is_deterministic() -> None:
    assert generate(saxpy(), openmp=True).text == generate(saxpy(), openmp=True).text


def test_a_dialect_without_a_type_is_a_codegen_error() -> None:
    """The shared renderer has no 16-bit float type (CUDA's adds half; C keeps the bits: below)."""
    A = loom.decl_buffer((4,), "float16", name="A")
    f = PrimFunc([A.data], S.BufferStore(A, A[0], [1]), buffer_map={A.data: A})
    with pytest.raises(CodegenError, match="no C type for float16"):
        CStyleRenderer().render_function("f", f)


def test_16_bit_floats_are_their_bits_converted_where_the_ir_computes() -> None:
    """float16 memory and values are uint16_t; each operation widens, computes in float and rounds back."""
    A = loom.decl_buffer((4,), "float16", name="A")
    B = loom.decl_buffer((4,), "bfloat16", name="B")
    h = loom.var("h", "float16")
    body = S.SeqStmt([S.BufferStore(A, A[0] * h + loom.const(1.5, "float16"), [1]),
                      S.BufferStore(B, B[0].astype("float64").astype("bfloat16"), [2]),
                      S.BufferStore(A, A[3], [2])])
    f = PrimFunc([A.data, B.data, h], body, buffer_map={A.data: A, B.data: B})
    text = generate(f, name="f").text
    body_lines = lines(text[text.index("int32_t f("):])
    assert "uint16_t * restrict A" in text or "uint16_t *A = " in text
    assert "const uint16_t h = loom_f64_to_f16(loom_f64_of_bits(args[2]));" in body_lines
    assert ("A[1] = loom_f32_to_f16((loom_f16_to_f32(loom_f32_to_f16((loom_f16_to_f32(A[0]) * loom_f16_to_f32(h))))"
            " + loom_f16_to_f32(((uint16_t)0x3e00u))));") in body_lines
    # float64 -> bfloat16 goes through float32, as ml_dtypes converts
    assert "B[2] = loom_f32_to_bf16(((float)((double)loom_bf16_to_f32(B[0]))));" in body_lines
    assert "A[2] = A[3];" in body_lines  # a copy moves bits
    for helper in ("loom_f16_to_f32", "loom_f32_to_f16", "loom_f64_to_f16", "loom_bf16_to_f32", "loom_f32_to_bf16"):
        assert text.count(f"static inline {'float' if 'to_f32' in helper else 'uint16_t'} {helper}(") == 1


def test_16_bit_float_helpers_are_left_out_when_unused() -> None:
    assert "loom_f16_to_f32" not in generate(saxpy()).text


def test_compile_error_carries_the_message_and_command() -> None:
    with pytest.raises(CompileError) as info:
        compile_source("int f(void) { return undeclared_thing; }", flags="-O0", openmp=False)
    text = str(info.value)
    assert "undeclared_thing" in text and "command: cc -ffp-contract=off -O0 -fwrapv -shared -fPIC" in text


def test_missing_compiler_is_a_compile_error() -> None:
    with pytest.raises(CompileError, match="cannot run the C compiler"):
        compile_source("int x;", compiler="/nonexistent/cc", openmp=False)


class FakeGPU(CStyleRenderer):
    """A dialect made only of table and knob overrides, as a CUDA renderer would be."""

    kernel_prefix = "__global__ "
    restrict_keyword = "__restrict__"
    barrier = "__syncthreads()"
    thread_idx = {"threadIdx.x": "threadIdx.x"}
    code_for_op = {**CStyleRenderer.code_for_op, "tir.exp": lambda r, n: f"__expf({r.expr(n.args[0])})"}


def kernel() -> PrimFunc:
    A = loom.decl_buffer((32,), "float32", name="A")
    n = loom.var("n")
    tx = E.IterVar(E.Range(loom.const(0), loom.const(32)), loom.var("tx"), "thread_index", "threadIdx.x")
    sync = S.Evaluate(E.Call("int32", loom.ir.Op.get("tir.tvm_storage_sync"), [E.StringImm("shared")]))
    body = S.AttrStmt(tx, "thread_extent", 32, S.seq(S.BufferStore(A, loom.exp(A[tx.var]) * loom.cast(n, "float32"),
                                                                   [tx.var]), sync))
    return PrimFunc([A.data, n], body, buffer_map={A.data: A}, attrs={"tir.noalias": True})


def test_dialect_knobs_drive_the_renderer() -> None:
    """The base renders plain C functions of typed parameters: no calling convention to undo."""
    text = "\n".join(FakeGPU().render_function("k", kernel()))
    assert text.startswith("__global__ void k(float * __restrict__ A, int32_t n) {")
    assert "args" not in text and "error" not in text and "return" not in text
    assert "const int32_t tx = (int32_t)(threadIdx.x);" in text
    assert "A[tx] = (__expf(A[tx]) * ((float)n));" in text and "__syncthreads();" in text


def test_the_c_dialect_lowers_math_through_its_rules() -> None:
    """Math intrinsics LowerIntrin did not lower go through loom_c.intrinsic_rules (here expf), and the
    CPU renders threads as loops."""
    plain = "\n".join(CRenderer().render_function("k", kernel()))
    assert plain.startswith("int32_t k(const uint64_t *args, const char **error) {")
    assert "for (int32_t tx = 0; tx < 32; ++tx) {" in plain and "expf(A[tx])" in plain and "sync" not in plain
    with pytest.raises(CodegenError, match="cannot render intrinsic tir.exp"):
        CStyleRenderer().render_function("k", kernel())  # the bare base has no rules


class Refusing(CStyleRenderer):
    """A device dialect keeps the base's refusals of asserts and heap or device memory."""


@pytest.mark.parametrize("what", ["assert", "heap", "device"])
def test_base_hooks_refuse_what_a_device_cannot_do(what: str) -> None:
    A = loom.decl_buffer((4,), "float32", name="A")
    store = S.BufferStore(A, loom.const(0.0, "float32"), [0])
    if what == "assert":
        body: S.Stmt = S.AssertStmt(loom.const(True, "bool"), "never", store)
    else:
        annotations = {abi.DEVICE_TYPE_ANNOTATION: 2} if what == "device" else {}
        size = 4 if what == "device" else 1 << 20
        body = S.Allocate(loom.var("T", "handle"), "float32", [size], loom.const(True, "bool"), store,
                          annotations=annotations)
    f = PrimFunc([A.data], body, buffer_map={A.data: A})
    with pytest.raises(CodegenError, match={"assert": "assertion", "heap": "outside the stack",
                                            "device": "device memory"}[what]):
        Refusing().render_function("k", f)


class Hooked(CStyleRenderer):
    """Every function hook overridden: signature, prologue, epilogue, asserts, heap memory, calls."""

    def function_signature(self, name: str, func: PrimFunc) -> str:
        return f"int {self.symbol(name)}({', '.join(self.typed_parameters(func))})"

    def function_prologue(self, name: str, func: PrimFunc) -> None:
        self.emit("enter();")

    def function_epilogue(self, name: str, func: PrimFunc) -> None:
        self.emit("return 0;")

    def assert_failure(self, message: str) -> str:
        return f"{self.error_cleanup()}return fail({self.string_literal(message)});"

    def allocate_heap(self, s, ctype: str, name: str) -> Release:
        self.emit(f"{ctype} *{name} = my_alloc({self.byte_size(s, ctype)});")
        return Release(f"my_free({name});", f"my_free_at_end({name});")

    def call_global(self, call) -> str:
        return f"launch_{super().call_global(call)}"


def test_overridden_hooks_shape_the_function() -> None:
    A = loom.decl_buffer((4,), "float32", name="A")
    T = loom.var("T", "handle")
    inner = S.AssertStmt(loom.const(False, "bool"), "bad", S.Evaluate(
        E.Call("int32", loom.ir.GlobalVar("g"), [A.data, loom.const(3)])))
    f = PrimFunc([A.data], S.Allocate(T, "float32", [1 << 20], loom.const(True, "bool"), inner),
                 buffer_map={A.data: A})
    assert lines("\n".join(Hooked().render_function("h", f))) == [
        "int h(float *A) {",
        "enter();",
        "float *T = my_alloc((size_t)(1048576) * sizeof(float));",
        'if (!(0)) { my_free(T); return fail("bad"); }',
        "launch_g(A, 3);",
        "my_free_at_end(T);",
        "return 0;",
        "}",
    ]


def threaded(two_stages: bool) -> tuple:
    """Two stages binding the same block and thread axes (or one), as a GPU schedule without shared memory."""
    n = 64
    A = loom.placeholder((n,), name="A")
    B = loom.compute((n,), lambda i: A[i] * 2.0, name="B")
    C = loom.compute((n,), lambda i: B[i] + 1.0, name="C")
    s = loom.create_schedule(C.op)
    bx, tx = loom.thread_axis("blockIdx.x"), loom.thread_axis("threadIdx.x")
    for T in (B, C) if two_stages else (C,):
        outer, inner = s[T].split(T.op.axis[0], factor=16)
        s[T].bind(outer, bx)
        s[T].bind(inner, tx)
    return s, [A, C]


@pytest.mark.parametrize("two_stages", [False, True])
def test_thread_bound_stages_run_as_serial_loops(two_stages: bool, tmp_path, monkeypatch) -> None:
    """Each binding declares its thread variable where it is bound, also when two stages bind the same one."""
    monkeypatch.setenv("LOOM_CACHE_DIR", str(tmp_path))
    s, args = threaded(two_stages)
    f = loom.build(s, args, target="c -flags=-O1")
    a = np.arange(64, dtype="float32")
    c = np.zeros(64, "float32")
    f(a, c)
    np.testing.assert_array_equal(c, a * 2.0 + 1.0)
    loops = [x for x in lines(f.get_source()) if x.startswith("for (int32_t threadIdx_x = 0;")]
    assert len(loops) == (2 if two_stages else 1)


def test_thread_bindings_inside_a_cache_stage(tmp_path, monkeypatch) -> None:
    """A local cache stage attached under bound threads, and a second stage binding the same threads."""
    monkeypatch.setenv("LOOM_CACHE_DIR", str(tmp_path))
    M, N, K = 16, 16, 8
    A, B = loom.placeholder((M, K), name="A"), loom.placeholder((K, N), name="B")
    k = loom.reduce_axis((0, K), name="k")
    C = loom.compute((M, N), lambda i, j: loom.sum(A[i, k] * B[k, j], axis=k), name="C")
    D = loom.compute((M, N), lambda i, j: C[i, j] * 2.0, name="D")
    s = loom.create_schedule(D.op)
    CL = s.cache_write(C, "local")
    axes = [loom.thread_axis(t) for t in ("blockIdx.y", "blockIdx.x", "threadIdx.y", "threadIdx.x")]
    for T in (C, D):
        io, ii = s[T].split(s[T].op.axis[0], factor=4)
        jo, ji = s[T].split(s[T].op.axis[1], factor=4)
        s[T].reorder(io, jo, ii, ji)
        for ax, t in zip((io, jo, ii, ji), axes):
            s[T].bind(ax, t)
    s[CL].compute_at(s[C], s[C].leaf_iter_vars[3])
    f = loom.build(s, [A, B, D], target="c -flags=-O1")
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((M, K)).astype("float32"), rng.standard_normal((K, N)).astype("float32")
    d = np.zeros((M, N), "float32")
    f(a, b, d)
    np.testing.assert_allclose(d, 2 * a @ b, rtol=1e-5, atol=1e-5)


def test_lowered_module_renders_every_function() -> None:
    n = loom.var("n")
    X = loom.placeholder((n,), name="X")
    Y = loom.compute((n,), lambda i: loom.sigmoid(X[i]), name="Y")
    s = loom.create_schedule(Y.op)
    src = generate(loom.lower(s, [X, Y], name="sig"), openmp=True)
    assert src.symbols == {"sig": "sig"}
    lib = compile_source(src.text, flags="-O1", openmp=True)
    assert lib.function("sig").restype is not None


def test_names_alike_once_sanitised_get_distinct_symbols() -> None:
    f = saxpy()
    src = generate(loom.ir.IRModule({"a.b": f, "a-b": f}))
    assert src.symbols == {"a.b": "loom_fn_a_2eb", "a-b": "loom_fn_a_2db"}


@pytest.mark.parametrize("name", ["loom_c.cc", "loom_c.codegen", "loom_c.intrinsic_rules", "loom_c.runtime",
                                  "loom_c.vector_ops"])
def test_docstring_examples(name: str, tmp_path, monkeypatch) -> None:
    import doctest
    import importlib

    monkeypatch.setenv("LOOM_CACHE_DIR", str(tmp_path))
    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0 and result.failed == 0
