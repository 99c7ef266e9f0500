"""``loom.hybrid.HybridModule`` and ``loom.hybrid.build``: source text, files, and clear errors."""
# ruff: noqa: F821, F841 - hybrid keywords (output_tensor, range kinds, math) are injected, not imported

import traceback

import numpy as np
import pytest

import loom
from loom.errors import LoomTypeError, LoomValueError
from loom.hybrid import HybridModule, HybridSyntaxError, dump_source
from loom.te.schedule_ops import schedule_to_stmt

SCALE = '''
def scale(a, k):
    b = output_tensor(a.shape, a.dtype)
    for i in range(a.shape[0]):
        b[i] = a[i] * k
    return b
'''

EDITED = '''"""A module edited by hand: imports and a decorator around the one function are fine."""
import loom


@loom.hybrid.script
def blend(a, b):
    c = output_tensor(a.shape, a.dtype)
    for i in range(a.shape[0]):
        c[i] = a[i] * 0.25 + b[i] * 0.75
    return c
'''


def test_a_module_from_text_emulates_and_compiles(target):
    mod = HybridModule(SCALE)
    assert mod.name == "scale" and mod.get_source() == mod.source == SCALE
    x = np.arange(5, dtype="float32")
    np.testing.assert_allclose(mod(x, 3.0), x * 3.0)
    A = loom.placeholder((5,), name="a")
    B = mod(A, 3.0)
    f = loom.build(loom.create_schedule(B.op), [A, B], target=target)
    out = np.zeros(5, "float32")
    f(x, out)
    np.testing.assert_allclose(out, x * 3.0)


def test_save_appends_py_and_load_reads_an_edited_file(tmp_path, target):
    path = HybridModule(SCALE).save(str(tmp_path / "scale"))
    assert path.endswith("scale.py") and open(path).read() == SCALE
    assert HybridModule(SCALE).save(str(tmp_path / "same.py")).endswith("same.py")
    edited = tmp_path / "blend.py"
    edited.write_text(EDITED)
    mod = HybridModule().load(str(edited))
    assert mod.name == "blend" and mod.get_source() == EDITED
    x, y = np.ones(4, "float32"), np.full(4, 2.0, "float32")
    np.testing.assert_allclose(mod(x, y), 1.75)
    A, B = loom.placeholder((4,), name="a"), loom.placeholder((4,), name="b")
    C = mod(A, B)
    f = loom.build(loom.create_schedule(C.op), [A, B, C], target=target)
    out = np.zeros(4, "float32")
    f(x, y, out)
    np.testing.assert_allclose(out, 1.75)


def test_errors_in_a_loaded_file_point_into_the_file(tmp_path):
    path = tmp_path / "broken.py"
    path.write_text("import loom\n\n\ndef broken(a):\n    b = output_tensor(a.shape, a.dtype)\n"
                    "    b[0] = foo(a[0])\n    return b\n")
    mod = HybridModule().load(str(path))
    with pytest.raises(HybridSyntaxError, match="unknown name 'foo'") as info:
        mod(loom.placeholder((3,), name="a"))
    assert (info.value.filename, info.value.lineno, info.value.col) == (str(path), 6, 12)


def test_a_module_from_text_shows_its_lines_in_tracebacks():
    mod = HybridModule(SCALE.replace("a[i] * k", "a[i] * k + missing"))
    with pytest.raises(NameError) as info:
        mod(np.ones(2, "float32"), 1.0)
    last = traceback.extract_tb(info.value.__traceback__)[-1]
    assert last.filename.startswith("<loom.hybrid.HybridModule source #") and last.lineno == 5
    assert last.line == "b[i] = a[i] * k + missing"  # the text is in linecache


@pytest.mark.parametrize("text, pattern", [
    ("def f(a):\n    return a\ndef g(a):\n    return a\n", "holds one function definition"),
    ("x = 1\ndef f(a):\n    return a\n", "holds one function definition, plus imports; found FunctionDef"),
    ("import numpy\n", "holds one function definition"),
])
def test_module_text_must_hold_one_function(text, pattern):
    with pytest.raises(LoomValueError, match=pattern):
        HybridModule(text)


def test_module_errors():
    with pytest.raises(HybridSyntaxError, match="the hybrid module is not valid Python") as info:
        HybridModule("def f(a):\n    return a +\n")
    assert info.value.lineno == 2
    with pytest.raises(LoomValueError, match="defines scale, not other"):
        HybridModule(SCALE, name="other")
    with pytest.raises(LoomTypeError, match=r"HybridModule takes the source text.*HybridModule\(\)\.load"):
        HybridModule(b"def f(): pass")
    with pytest.raises(LoomValueError, match=r"looks like a path; read a file with HybridModule\(\)\.load"):
        HybridModule("/tmp/kernel.py")
    with pytest.raises(LoomValueError, match="this HybridModule is empty"):
        HybridModule().get_source()
    with pytest.raises(LoomValueError, match="HybridModule.load: cannot read /no/such/file.py"):
        HybridModule().load("/no/such/file.py")
    assert repr(HybridModule()) == "<HybridModule (empty)>" and repr(HybridModule(SCALE)) == "<HybridModule scale>"


def _double():
    A = loom.placeholder((8,), name="A")
    B = loom.compute((8,), lambda i: A[i] * 2.0, name="B")
    return A, B, loom.create_schedule(B.op)


def test_build_names_the_function_and_is_deterministic():
    A, B, s = _double()
    mod = loom.hybrid.build(s, [A], B, name="double")  # a single output tensor is fine too
    assert mod.name == "double" and mod.get_source().startswith("def double(A):\n")
    assert loom.hybrid.build(s, [A], [B], name="double").get_source() == mod.get_source()


def test_names_become_unique_identifiers():
    A = loom.placeholder((4,), name="range")  # a keyword's name
    B = loom.compute((4,), lambda i: A[i] + 1.0, name="B.local")
    C = loom.compute((4,), lambda i: B[i] * 2.0, name="min")
    src = loom.hybrid.build(loom.create_schedule(C.op), [A], [C]).get_source()
    assert src.startswith("def hybrid_func(range_1):\n    min_1 = output_tensor((4,), 'float32')\n")
    assert "B_local = allocate((4,), 'float32', 'global')" in src
    np.testing.assert_allclose(HybridModule(src)(np.ones(4, "float32")), 4.0)


def test_build_errors():
    A, B, s = _double()
    n = loom.var("n")
    with pytest.raises(LoomTypeError, match="hybrid.build takes a Schedule"):
        loom.hybrid.build(B, [A], [B])
    with pytest.raises(LoomTypeError, match="input 0 must be a Tensor or a Var, got int"):
        loom.hybrid.build(s, [3], [B])
    with pytest.raises(LoomValueError, match="output 0 .tensor B. is also an input"):
        loom.hybrid.build(s, [A, B], [B])
    with pytest.raises(LoomValueError, match="the function name must be a Python identifier"):
        loom.hybrid.build(s, [A], [B], name="for")
    with pytest.raises(LoomValueError, match="reads tensor A, which is neither an input, an output"):
        loom.hybrid.build(s, [], [B])
    X = loom.placeholder((n,), name="X")
    Y = loom.compute((n,), lambda i: X[i] + 1.0, name="Y")
    with pytest.raises(LoomValueError, match="uses the variable n, which is neither a loop variable nor one of "
                                             "the inputs"):
        loom.hybrid.build(loom.create_schedule(Y.op), [X], [Y])


def test_what_hybrid_script_cannot_spell_is_named():
    A = loom.placeholder((8,), "int32", name="A")
    B = loom.compute((8,), lambda i: loom.truncdiv(A[i], 3), name="B")
    with pytest.raises(LoomValueError, match=r"integer truncating division \(Div/Mod\) has no hybrid spelling"):
        loom.hybrid.build(loom.create_schedule(B.op), [A], [B])
    C = loom.compute((8,), lambda i: A[i] & 3, name="C")
    with pytest.raises(LoomValueError, match="the call tir.bitwise_and has no hybrid spelling"):
        loom.hybrid.build(loom.create_schedule(C.op), [A], [C])
    with pytest.raises(LoomTypeError, match="dump_source takes a statement"):
        dump_source(A, [A], [A])


def test_likely_is_a_keyword(target):
    mod = HybridModule("def guarded(a):\n    b = output_tensor((6,), 'float32')\n    for i in range(2):\n"
                       "        for j in range(4):\n            if likely(i * 4 + j < 6):\n"
                       "                b[i * 4 + j] = a[i * 4 + j] + 1.0\n    return b\n")
    x = np.arange(6, dtype="float32")
    np.testing.assert_allclose(mod(x), x + 1.0)
    A = loom.placeholder((6,), name="a")
    B = mod(A)
    assert "likely(" in str(B.op)
    f = loom.build(loom.create_schedule(B.op), [A, B], target=target)
    out = np.zeros(6, "float32")
    f(x, out)
    np.testing.assert_allclose(out, x + 1.0)


def test_dump_source_of_a_statement():
    A, B, s = _double()
    src = dump_source(schedule_to_stmt(s), [A], [B], "double")
    assert src == loom.hybrid.build(s, [A], [B], "double").get_source()
