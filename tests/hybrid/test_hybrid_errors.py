"""Each rule of the hybrid language fails with a HybridSyntaxError at the user's line and column."""
# ruff: noqa: F821, F841 - hybrid keywords (output_tensor, range kinds, math) are injected, not imported

import inspect
import os
import traceback

import numpy as np
import pytest

import loom
from loom.hybrid import HybridArgumentError, HybridSyntaxError, script

import hybrid_kernels as K

GLOBAL_ARRAY = np.zeros(3)


def plain_python(x):
    return x


@script
def unsupported_syntax(a):
    b = output_tensor(a.shape, a.dtype)
    while a[0] > 0.0:
        b[0] = 1.0
    return b


@script
def unknown_name(a):
    b = output_tensor(a.shape, a.dtype)
    for i in range(a.shape[0]):
        b[i] = foo(a[i])
    return b


@script
def out_of_scope(a):
    b = output_tensor(a.shape, a.dtype)
    for i in range(a.shape[0]):
        t = a[i] * 2.0
        b[i] = t
    b[0] = t
    return b


@script
def shape_by_loop_var(a):
    b = output_tensor(a.shape, a.dtype)
    for i in range(2):
        for j in range(a.shape[i]):
            b[i, j] = a[i, j]
    return b


@script
def container_by_loop_var(a, offsets):
    b = output_tensor(a.shape, a.dtype)
    for i in range(a.shape[0]):
        b[i] = a[i] + offsets[i]
    return b


@script
def two_inputs(a, b):
    c = output_tensor(a.shape, a.dtype)
    for i in range(a.shape[0]):
        c[i] = a[i] + b[i]
    return c


@script
def assigns_loop_var(a):
    b = output_tensor(a.shape, a.dtype)
    for i in range(a.shape[0]):
        i = 0
        b[i] = a[i]
    return b


@script
def variable_changes_dtype(a):
    b = output_tensor(a.shape, a.dtype)
    s = 0
    for i in range(a.shape[0]):
        s += a[i]
    b[0] = s
    return b


@script
def output_not_returned(a):
    b = output_tensor(a.shape, a.dtype)
    c = output_tensor(a.shape, a.dtype)
    for i in range(a.shape[0]):
        b[i] = a[i]
        c[i] = a[i]
    return b


@script
def early_return(a):
    b = output_tensor(a.shape, a.dtype)
    for i in range(a.shape[0]):
        b[i] = a[i]
        return b
    return b


@script
def no_return(a):
    b = output_tensor(a.shape, a.dtype)
    b[0] = a[0]


@script
def output_in_loop(a):
    for i in range(a.shape[0]):
        b = output_tensor(a.shape, a.dtype)
        b[i] = a[i]
    return b


@script
def wrong_index_count(a):
    b = output_tensor(a.shape, a.dtype)
    for i in range(a.shape[0]):
        b[i] = a[i, i]
    return b


@script
def loop_keyword_as_value(a):
    b = output_tensor(a.shape, a.dtype)
    r = range(3)
    b[0] = a[0]
    return b


@script
def loop_over_tensor(a):
    b = output_tensor(a.shape, a.dtype)
    for x in a:
        b[0] = x
    return b


@script
def integer_true_division(a):
    b = output_tensor(a.shape, a.dtype)
    for i in range(a.shape[0]):
        b[i] = a[i] + i / 2
    return b


@script
def unsupported_attribute(a):
    b = output_tensor(a.shape, a.dtype)
    b[0] = a.size
    return b


@script
def calls_python(a):
    b = output_tensor(a.shape, a.dtype)
    for i in range(a.shape[0]):
        b[i] = plain_python(a[i])
    return b


@script
def reads_global_array(a):
    b = output_tensor(a.shape, a.dtype)
    b[0] = GLOBAL_ARRAY[0]
    return b


@script
def const_range_of_size(a, n):
    b = output_tensor(a.shape, a.dtype)
    for i in const_range(n):
        b[i] = a[i]
    return b


@script
def bad_scope(a):
    b = output_tensor(a.shape, a.dtype)
    t = allocate((4,), "float32", "texture")
    b[0] = a[0]
    return b


@script
def bad_thread_tag(a):
    b = output_tensor(a.shape, a.dtype)
    for t in bind("warp.x", 4):
        b[t] = a[t]
    return b


@script
def bitwise(a):
    b = output_tensor(a.shape, a.dtype)
    for i in range(a.shape[0]):
        b[i] = a[i] & 1
    return b


@script
def sliced(a):
    b = output_tensor(a.shape, a.dtype)
    b[0] = a[0:2]
    return b


@script
def recursive(a):
    b = recursive(a)
    return b


@script
def calls_broken(a):
    c = unknown_name(a)
    return c


def _a(n=4, dtype="float32"):
    return loom.placeholder((n,), dtype, name="a")


#: rule -> (kernel, arguments, (text of the line, token the error points at), message pattern)
RULES = {
    "unsupported syntax": (unsupported_syntax, lambda: [_a()], ("while a[0]", "while"),
                           "unsupported syntax: while loops are not part of hybrid script"),
    "unknown name": (unknown_name, lambda: [_a()], ("foo(a[i])", "foo"), "unknown name 'foo'"),
    "used outside its block": (out_of_scope, lambda: [_a()], ("b[0] = t", "t"),
                               r"t is used outside the block that declares it \(declared at line \d+\)"),
    "shape index not constant": (shape_by_loop_var, lambda: [loom.placeholder((2, 3), name="a")],
                                 ("a.shape[i]", "i]"), "a.shape can only be indexed by a constant; i is not one"),
    "container index not constant": (container_by_loop_var, lambda: [_a(3), loom.convert([1.0, 2.0, 3.0])],
                                     ("offsets[i]", "i]"), "container offsets can only be indexed by a constant"),
    "assign a loop variable": (assigns_loop_var, lambda: [_a()], ("i = 0", "i"),
                               "cannot assign to the loop variable i"),
    "variable keeps its dtype": (variable_changes_dtype, lambda: [_a()], ("s += a[i]", "s += a[i]"),
                                 "variable s is int32 .* but is assigned a float32 value"),
    "output never returned": (output_not_returned, lambda: [_a()], ("c = output_tensor", "c"),
                              "output tensor c is never returned"),
    "return not last": (early_return, lambda: [_a()], ("        return b", "return"),
                        "return must be the last statement"),
    "no return": (no_return, lambda: [_a()], ("def no_return", "def"), "has no return statement"),
    "output declared in a loop": (output_in_loop, lambda: [_a()], ("b = output_tensor", "b = output_tensor"),
                                  "output_tensor must be declared at the top level"),
    "index count": (wrong_index_count, lambda: [_a()], ("a[i, i]", "i, i"),
                    r"tensor a has 1 dimension\(s\) but is indexed with 2 index\(es\)"),
    "loop keyword outside a for": (loop_keyword_as_value, lambda: [_a()], ("r = range(3)", "range(3)"),
                                   r"range\(\) makes a loop: use it as `for i in range\(...\)`"),
    "loop over a non-keyword": (loop_over_tensor, lambda: [_a()], ("for x in a", "a:"),
                                "a hybrid loop iterates over one of"),
    "integer true division": (integer_true_division, lambda: [_a()], ("i / 2", "i / 2"),
                              "'/' on integer expressions is ambiguous"),
    "unsupported attribute": (unsupported_attribute, lambda: [_a()], ("a.size", "a.size"),
                              "unsupported attribute .size of the tensor a"),
    "call of a Python function": (calls_python, lambda: [_a()], ("plain_python(a[i])", "plain_python"),
                                  "plain_python is a Python function, not a hybrid function"),
    "global of an unsupported type": (reads_global_array, lambda: [_a()], ("GLOBAL_ARRAY[0]", "GLOBAL_ARRAY"),
                                      "GLOBAL_ARRAY is a numpy.ndarray from the enclosing Python scope"),
    "const_range bounds": (const_range_of_size, lambda: [_a(), loom.var("n")], ("const_range(n)", "const_range"),
                           "const_range needs constant bounds"),
    "allocate scope": (bad_scope, lambda: [_a()], ("allocate(", "allocate"),
                       r"allocate: scope must be one of \['global', 'shared', 'local'\], got the string 'texture'"),
    "bind tag": (bad_thread_tag, lambda: [_a()], ('bind("warp.x"', "bind"), "bind needs a thread tag"),
    "bitwise operators": (bitwise, lambda: [_a(dtype="int32")], ("a[i] & 1", "a[i] & 1"),
                          "operator & is not supported"),
    "recursion": (recursive, lambda: [_a()], ("b = recursive(a)", "recursive(a)"),
                  r"recursive calls itself \(directly or through other hybrid functions\)"),
    "slices": (sliced, lambda: [_a()], ("a[0:2]", "0:2"), "slices are not supported"),
}


def locate(func, line_text, token):
    """(line, column) of ``token`` on the first line of ``func``'s source containing ``line_text``."""
    lines, first = inspect.getsourcelines(func.__wrapped__)
    for k, line in enumerate(lines):
        if line_text in line:
            return first + k, line.index(token, line.index(line_text)) + 1
    raise AssertionError(f"{line_text!r} is not in the source of {func.__name__}")


@pytest.mark.parametrize("rule", sorted(RULES))
def test_rule_violation_points_at_the_line_and_column(rule):
    kernel, make_args, (line_text, token), pattern = RULES[rule]
    with pytest.raises(HybridSyntaxError, match=pattern) as info:
        kernel(*make_args())
    err = info.value
    lineno, col = locate(kernel, line_text, token)
    assert (err.filename, err.lineno, err.col) == (__file__, lineno, col)
    text = str(err).splitlines()
    assert text[0].startswith(f"{__file__}:{lineno}:{col}: ")
    assert line_text in text[1]
    assert text[2].index("^") == text[1].index(token, text[1].index(line_text))


def test_compiling_with_a_numpy_array_is_an_argument_error_at_the_parameter():
    with pytest.raises(HybridArgumentError, match="argument b is a numpy.ndarray; a compiled hybrid function"
                                                  ".*pass loom.placeholder tensors") as info:
        two_inputs(_a(), np.zeros(4, "float32"))
    assert isinstance(info.value, TypeError)
    assert (info.value.lineno, info.value.col) == locate(two_inputs, "def two_inputs", "b)")


def test_emulating_with_an_unsupported_object_is_an_argument_error_at_the_parameter():
    with pytest.raises(HybridArgumentError, match="argument a is a dict; emulation takes numpy arrays"):
        two_inputs({}, np.zeros(4, "float32"))


def test_missing_argument_is_an_argument_error():
    with pytest.raises(HybridArgumentError, match="missing argument for parameter b") as info:
        two_inputs(_a())
    assert (info.value.lineno, info.value.col) == locate(two_inputs, "def two_inputs", "b)")


def test_error_in_a_called_function_points_into_the_callee():
    with pytest.raises(HybridSyntaxError, match="unknown name 'foo'") as info:
        calls_broken(_a())
    assert (info.value.lineno, info.value.col) == locate(unknown_name, "foo(a[i])", "foo")
    assert "in hybrid function unknown_name" in str(info.value)


def _internal_frames(tb):
    hybrid_dir = os.path.dirname(inspect.getfile(HybridSyntaxError))
    return [f for f in traceback.extract_tb(tb) if f.filename.startswith(hybrid_dir)]


def test_errors_carry_no_internal_frames_unless_debugging(monkeypatch):
    monkeypatch.delenv("LOOM_DEBUG", raising=False)
    with pytest.raises(HybridSyntaxError) as info:
        unknown_name(_a())
    frames = _internal_frames(info.value.__traceback__)
    assert [f.name for f in frames] == ["__call__"]  # only the call that raised it
    assert info.value.__cause__ is None and info.value.__suppress_context__
    monkeypatch.setenv("LOOM_DEBUG", "1")
    with pytest.raises(HybridSyntaxError) as info:
        unknown_name(_a())
    assert any(f.filename.endswith("parser.py") for f in _internal_frames(info.value.__traceback__))


def test_emulation_keeps_python_semantics_where_compilation_rejects_the_script():
    """The rules are the compiler's: emulation runs plain Python, so the same script may run there."""
    a = np.arange(4, dtype="float32")
    np.testing.assert_array_equal(out_of_scope(a), [6.0, 2.0, 4.0, 6.0])
    np.testing.assert_array_equal(K.square(a), a * a)
