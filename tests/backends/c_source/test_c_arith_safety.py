"""The C backend's division checks and 64-bit buffer offsets, in the generated source and at run time.

A zero divisor fails the function (the conformance suite checks the error every
kind raises); a non-zero constant divisor keeps its plain code.  Offsets into
a buffer that may exceed ``int32_t`` are computed in ``int64_t``: an int8 array
of shape ``(3, 2**30)`` is read and written at its last elements, through a
sparse file mapped in a child process (3 GiB of address space, a few pages of
memory), where a wrapped offset would crash or write outside the array.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

import loom
from loom.codegen import CodegenError, CStyleRenderer
from loom.ir import BufferStore, Evaluate, For, IRModule, PrimFunc
from loom_c.codegen import generate
from programs import division


@pytest.mark.parametrize("form", ["scalar", "vector", "parallel"])
@pytest.mark.parametrize("op", ["truncdiv", "truncmod", "floordiv", "floormod"])
def test_constant_divisors_are_not_checked(op: str, form: str) -> None:
    for dtype, divisor in (("int32", 7), ("int64", -3), ("uint8", 5), ("int8", -1)):
        text = generate(division(op, dtype, divisor, form), openmp=True).text
        assert "== 0, 0)" not in text and "division by zero" not in text, f"{op} {dtype} by {divisor} ({form})"


@pytest.mark.parametrize("form", ["scalar", "vector"])
def test_loaded_divisors_fail_the_function(form: str) -> None:
    text = generate(division("floordiv", "int32", "array", form), openmp=True).text
    assert text.count("== 0, 0)) { *error = \"integer division by zero in A[") == 1
    assert "return -1; }" in text


def test_a_zero_divisor_in_an_openmp_loop_fails_after_the_loop() -> None:
    """No statement may leave an OpenMP loop: the message waits in a variable of the loop."""
    lines = [x.strip() for x in generate(division("truncmod", "int64", "array", "parallel"), openmp=True)
             .text.splitlines()]
    pragma = next(k for k, x in enumerate(lines) if x.startswith("#pragma omp parallel for"))
    assert lines[pragma - 1] == "const char *loom_failed_1 = 0;"
    assert any("__atomic_store_n(&loom_failed_1, \"integer division by zero in" in x and "goto loom_next_1;" in x
               for x in lines)
    end = lines.index("loom_next_1: ;")
    assert lines[end + 1] == "}" and lines[end + 2] == "if (loom_failed_1) { *error = loom_failed_1; return -1; }"


def test_a_dialect_without_errors_renders_no_check() -> None:
    func = division("floordiv", "int32", "array")["f"]
    text = "\n".join(CStyleRenderer().render_function("f", func))
    assert "loom_floordiv(" in text and "division by zero" not in text


def test_messages_are_utf8_like_the_runtime_reads_them() -> None:
    """A message naming a non-ASCII variable reads back as written (it was one Latin-1 byte per character)."""
    assert CStyleRenderer().string_literal('A\u00e9[i] "?"') == '"A\\303\\251[i] \\"\\?\\""'


def test_an_external_call_of_a_function_symbol_is_refused() -> None:
    f = PrimFunc([], Evaluate(loom.call_extern("int32", "foo")))
    with pytest.raises(CodegenError, match="external C function 'foo' has the symbol of the module's function 'foo'"):
        generate(IRModule({"foo": f}))
    assert generate(IRModule({"bar": f})).symbols == {"bar": "bar"}


def _store_last(shape: tuple[int, int]) -> str:
    O = loom.decl_buffer(shape, "int8", name="O")
    j = loom.var("j")
    body = For(j, 0, 4, "serial", BufferStore(O, loom.const(7, "int8"), [shape[0] - 1, shape[1] - 4 + j]))
    return generate(PrimFunc([O.data], body, buffer_map={O.data: O}), name="w").text


def test_offsets_widen_only_where_int32_could_overflow() -> None:
    assert "O[1 * 8 + (4 + j)] = 7;" in [x.strip() for x in _store_last((2, 8)).splitlines()]
    assert "O[(int64_t)(2) * 1073741824 + (int64_t)((1073741820 + j))] = 7;" in \
        [x.strip() for x in _store_last((3, 2**30)).splitlines()]
    n = loom.var("n")
    A = loom.placeholder((n, n), "float32", name="A")
    B = loom.compute((n, n), lambda i, k: A[i, k] + 1.0, name="B")
    text = generate(loom.lower(loom.create_schedule(B.op), [A, B], name="g")).text
    assert "B[(int64_t)(i) * n + (int64_t)(k)] = (A[(int64_t)(i) * n + (int64_t)(k)] + 1.0f);" in text
    C = loom.placeholder((n,), "float32", name="C")  # one index, no arithmetic: nothing to widen
    D = loom.compute((n,), lambda i: C[i] * 2.0, name="D")
    assert "D[i] = (C[i] * 2.0f);" in generate(loom.lower(loom.create_schedule(D.op), [C, D], name="h")).text


_BIG_ARRAY_CHILD = """
import sys
import numpy as np
import loom
from loom.ir import BufferStore, For, PrimFunc

kind, path = sys.argv[1], sys.argv[2]
R, C = 3, 2**30
with open(path, "wb") as fh:
    fh.truncate(R * C)  # sparse: only the pages written below take memory or disk
big = np.memmap(path, dtype="int8", mode="r+", shape=(R, C))
big[2, C - 4:] = [1, 2, 3, 4]
A = loom.placeholder((R, C), "int8", name="A")
B = loom.compute((R, 4), lambda i, j: A[i, C - 4 + j], name="B")
read = loom.build(loom.create_schedule(B.op), [A, B], target=kind)
out = np.zeros((R, 4), "int8")
read(big, out)
O = loom.decl_buffer((R, C), "int8", name="O")
j = loom.var("j")
body = For(j, 0, 4, "serial", BufferStore(O, loom.const(7, "int8"), [R - 1, C - 4 + j]))
write = loom.build(PrimFunc([O.data], body, buffer_map={O.data: O}).with_attr("global_symbol", "w"), target=kind)
write(big)
print(out.tolist(), big[R - 1, C - 8:].tolist(), big[0, :4].tolist())
"""


@pytest.mark.parametrize("kind", ["c", "llvm"])
def test_three_gigabyte_array_is_addressed_in_64_bits(kind: str, tmp_path) -> None:
    big = tmp_path / "big.bin"
    try:
        proc = subprocess.run([sys.executable, "-c", textwrap.dedent(_BIG_ARRAY_CHILD), kind, str(big)],
                              capture_output=True, text=True, timeout=300)
    finally:
        big.unlink(missing_ok=True)  # sparse, but 3 GiB to tools that do not know it
    assert proc.returncode == 0, f"the child ended with status {proc.returncode}:\n{proc.stderr[-3000:]}"
    read, written, untouched = "[[0, 0, 0, 0], [0, 0, 0, 0], [1, 2, 3, 4]]", "[0, 0, 0, 0, 7, 7, 7, 7]", "[0, 0, 0, 0]"
    assert proc.stdout.split("\n")[0] == f"{read} {written} {untouched}"


def test_variables_named_like_library_names_compile() -> None:
    """``linux`` and ``NAN`` are macros of the headers, ``exp`` a function the body calls: locals avoid them."""
    import numpy as np

    A = loom.placeholder((8,), "float64", name="linux")
    B = loom.placeholder((8,), "float64", name="NAN")
    C = loom.compute((8,), lambda i: loom.exp(A[i]) + B[i], name="exp")
    f = loom.build(loom.create_schedule(C.op), [A, B, C], target="c -flags=-O1")
    a, b, c = np.linspace(0, 1, 8), np.ones(8), np.zeros(8)
    f(a, b, c)
    np.testing.assert_allclose(c, np.exp(a) + 1)
    assert "double * restrict v_linux" in f.get_source()
