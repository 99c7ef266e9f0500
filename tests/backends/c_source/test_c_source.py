"""The C text itself: golden key lines, names, dialect tables, and compiler errors."""

from __future__ import annotations

import pytest

import loom
from loom.codegen import CodegenError, CStyleRenderer, sanitize
from loom.ir import expr as E
from loom.ir import stmt as S
from loom.ir.function import PrimFunc
from loom_c.cc import CompileError, compile_source
from loom_c.codegen import generate


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
        "#pragma omp parallel for schedule(static) num_threads(loom_thread_count())",
        "for (int32_t i = 0; i < n; ++i) {",
        "B[i] = ((alpha * A[i]) + B[i]);",
    ]
    assert body[9:] == ["}", "return 0;", "}"]
    head = lines(text[:text.index("int32_t saxpy(")])
    assert '__attribute__((visibility("default"))) int32_t loom_num_threads = 0;' in head
    assert ("static inline int loom_thread_count(void) { return loom_num_threads > 0 ? loom_num_threads : "
            "omp_get_max_threads(); }") in head


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


def test_unsupported_dtype_is_a_codegen_error() -> None:
    A = loom.decl_buffer((4,), "float16", name="A")
    f = PrimFunc([A.data], S.BufferStore(A, A[0], [1]), buffer_map={A.data: A})
    with pytest.raises(CodegenError, match="no C type for float16"):
        generate(f)


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


def test_dialect_knobs_drive_the_renderer() -> None:
    A = loom.decl_buffer((32,), "float32", name="A")
    tx = E.IterVar(E.Range(loom.const(0), loom.const(32)), loom.var("tx"), "thread_index", "threadIdx.x")
    sync = S.Evaluate(E.Call("int32", loom.ir.Op.get("tir.tvm_storage_sync"), [E.StringImm("shared")]))
    body = S.AttrStmt(tx, "thread_extent", 32, S.seq(S.BufferStore(A, loom.exp(A[tx.var]), [tx.var]), sync))
    f = PrimFunc([A.data], body, buffer_map={A.data: A}, attrs={"tir.noalias": True})
    text = "\n".join(FakeGPU().render_function("k", f))
    assert text.startswith("__global__ int32_t k(const uint64_t *args, const char **error) {")
    assert "float * __restrict__ A" in text
    assert "const int32_t tx = (int32_t)(threadIdx.x);" in text
    assert "A[tx] = __expf(A[tx]);" in text and "__syncthreads();" in text
    plain = "\n".join(CStyleRenderer().render_function("k", f))
    assert "for (int32_t tx = 0; tx < 32; ++tx) {" in plain and "expf(A[tx])" in plain and "sync" not in plain


def test_lowered_module_renders_every_function() -> None:
    n = loom.var("n")
    X = loom.placeholder((n,), name="X")
    Y = loom.compute((n,), lambda i: loom.sigmoid(X[i]), name="Y")
    s = loom.create_schedule(Y.op)
    src = generate(loom.lower(s, [X, Y], name="sig"), openmp=True)
    assert src.symbols == {"sig": "sig"}
    lib = compile_source(src.text, flags="-O1", openmp=True)
    assert lib.function("sig").restype is not None


def test_symbol_clashes_are_reported() -> None:
    f = saxpy()
    with pytest.raises(CodegenError, match="both become the C symbol 'a_b'"):
        generate(loom.ir.IRModule({"a.b": f, "a-b": f}))


@pytest.mark.parametrize("name", ["loom_c.cc", "loom_c.codegen", "loom_c.runtime"])
def test_docstring_examples(name: str, tmp_path, monkeypatch) -> None:
    import doctest
    import importlib

    monkeypatch.setenv("LOOM_CACHE_DIR", str(tmp_path))
    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0 and result.failed == 0
