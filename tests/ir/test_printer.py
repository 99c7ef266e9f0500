"""The text printer: golden text, Python precedence, unique names, and never raising."""

import ast
import operator
import textwrap

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

import loom
from ir_samples import SAMPLES
from loom.ir import expr as E
from loom.ir import stmt as S
from loom.ir.container import Array, Map
from loom.ir.function import GlobalVar, IRModule, PrimFunc
from loom.ir.op import Op
from loom.ir.printer import to_text

c = loom.const


def I(v):  # noqa: E743 - an int32 constant, unfolded
    return E.IntImm("int32", v)


X, Y = loom.var("x"), loom.var("y")
F, G = loom.var("f", "float32"), loom.var("g", "float32")
T = loom.var("t")
A = loom.decl_buffer((4, 8), "float32", name="A")


@pytest.mark.parametrize("expr, text", [
    (X + Y * 2, "x + y * 2"),
    ((X + Y) * 2, "(x + y) * 2"),
    (E.Sub(X, E.Sub(Y, I(1))), "x - (y - 1)"),
    (E.Sub(E.Sub(X, Y), I(1)), "x - y - 1"),
    (E.FloorMod(E.FloorDiv(X + 1, I(2)), I(3)), "(x + 1) // 2 % 3"),
    (E.FloorDiv(X, E.Mul(Y, I(2))), "x // (y * 2)"),
    (E.Mul(X, I(-3)), "x * -3"),
    (E.Sub(X, I(-3)), "x - -3"),
    (E.Add(I(-2), X), "-2 + x"),
    (E.EQ(X < Y, Y < X), "(x < y) == (y < x)"),
    (E.Or(E.And(X < 1, Y < 1), X > 5), "x < 1 and y < 1 or x > 5"),
    (E.And(X < 1, E.Or(Y < 1, X > 5)), "x < 1 and (y < 1 or x > 5)"),
    (E.Not(E.And(X < 1, Y < 1)), "not (x < 1 and y < 1)"),
    (E.Not(X < 1), "not (x < 1)"),
    (E.IntImm("bool", 1), "True"),
    (c(5, "int64"), "int64(5)"),
    (c(-5, "int64"), "int64(-5)"),
    (c(3, "uint8"), "uint8(3)"),
    (c(0.5, "float16"), "float16(0.5)"),
    (c(-2.5), "-2.5"),
    (c(float("inf"), "float64"), "float64('inf')"),
    (E.Cast("float32", X), "float32(x)"),
    (E.Cast("int64", I(5)), "int64(int32(5))"),
    (loom.truncdiv(X, 2), "truncdiv(x, 2)"),
    (loom.truncmod(X, Y), "truncmod(x, y)"),
    (F / (G / 2.0), "f / (g / 2.0)"),
    (E.Min(X, Y + 1), "min(x, y + 1)"),
    (loom.select(X > 0, X, 0), "select(x > 0, x, 0)"),
    (E.Broadcast(c(0.5), 4) + E.Ramp(F, c(1.0), 4), "broadcast(0.5, 4) + ramp(f, 1.0, 4)"),
    (E.Let(T, X + 1, T * T) + 1, "(let t = x + 1 in t * t) + 1"),
    (loom.exp(F), "exp(f)"),
    (loom.isnan(F), "isnan(f)"),
    (loom.reinterpret("float32", X), "reinterpret('float32', x)"),
    (loom.call_extern("int32", "puts", E.StringImm("hi")), "call_extern('int32', 'puts', 'hi')"),
    (E.Call("int32", Op.get("tir.likely"), [X < 1]), "likely(x < 1, dtype='int32')"),
    (E.Call("int32", GlobalVar("g"), [X]), "@g(x)"),
    (E.Call("float32", GlobalVar("g"), [X]), "@g(x, dtype='float32')"),
    (A[X, 2], "A[x, 2]"),
    (loom.decl_buffer((), name="Z")[()], "Z[()]"),
])
def test_expression_text(expr, text):
    assert str(expr) == text


def test_names_are_unique_and_deterministic():
    i1, i2 = loom.var("i"), loom.var("i")
    e = i1 * i2 + i1
    assert str(e) == "i * i_1 + i"
    assert str(i2 * i1) == "i * i_1", "numbering follows the order of appearance"
    assert str(loom.var("in") + loom.var("")) == "in_1 + v", "keywords and empty names are avoided"


def test_buffer_and_its_data_var_share_a_name():
    buf = loom.var("B", "handle")
    B = loom.decl_buffer((16,), "float32", name="B", data=buf)
    i = loom.var("i")
    stmt = S.Allocate(buf, "float32", [16], True, S.For(i, 0, 16, "serial", S.BufferStore(B, 0.0, [i])), "shared")
    assert str(stmt) == textwrap.dedent("""\
        B = allocate([16], 'float32', 'shared')
        for i in range(16):
            B[i] = 0.0""")


def test_two_buffers_with_one_name_are_told_apart():
    B1, B2 = loom.decl_buffer((4,), name="B"), loom.decl_buffer((4,), name="B")
    assert str(S.BufferStore(B1, B2[0], [0])) == "B[0] = B_1[0]"


def test_loops():
    i, m, n = loom.var("i"), loom.var("m"), loom.var("n")
    body = S.Evaluate(i)
    cases = [
        (S.For(i, 0, 8, "serial", body), "for i in range(8):"),
        (S.For(i, 2, 8, "unrolled", body), "for i in unroll(2, 10):"),
        (S.For(i, m, n, "parallel", body), "for i in parallel(m, m + n):"),
        (S.For(i, 0, n, "vectorized", body), "for i in vectorize(n):"),
        (S.For(i, 0, 32, "thread_binding", body, thread_tag="threadIdx.x"), "for i in thread_binding(32, 'threadIdx.x'):"),
        (S.For(i, 0, 4, "serial", body, annotations={"pragma_b": 2, "pragma_a": "x"}),
         "for i in range(4):  # annotations={'pragma_a': 'x', 'pragma_b': 2}"),
    ]
    for loop, head in cases:
        assert str(loop) == f"{head}\n    i"


def test_int64_loop_shows_its_dtype_through_constants():
    i = loom.var("i", "int64")
    assert str(S.For(i, 0, c(8, "int64"), "serial", S.no_op())) == "for i in range(int64(8)):\n    pass"


def test_if_elif_else_and_while():
    x = loom.var("x")
    stmt = S.IfThenElse(x < 0, S.Evaluate(I(1)), S.IfThenElse(x < 5, S.Evaluate(I(2)), S.Evaluate(I(3))))
    assert str(stmt) == "if x < 0:\n    1\nelif x < 5:\n    2\nelse:\n    3"
    assert str(S.IfThenElse(x < 0, S.no_op())) == "if x < 0:\n    pass"
    assert str(S.While(x < 10, S.Evaluate(x))) == "while x < 10:\n    x"


def test_let_assert_attr_and_nested_seq():
    x, v = loom.var("x"), loom.var("v")
    tx = E.IterVar(None, loom.var("tx"), "thread_index", "threadIdx.x")
    body = S.SeqStmt([S.Evaluate(v), S.SeqStmt([S.Evaluate(x), S.Evaluate(v + x)])])
    stmt = S.LetStmt(v, x + 1, S.AssertStmt(v > 0, "v must be positive", S.AttrStmt(tx, "thread_extent", 32, body)))
    assert str(stmt) == textwrap.dedent("""\
        v: int32 = x + 1
        assert v > 0, 'v must be positive'
        with attr(iter_var(tx, None, 'thread_index', 'threadIdx.x'), 'thread_extent', 32):
            v
            x
            v + x""")


def test_allocate_with_condition_and_annotations():
    p = loom.var("p", "handle")
    s = S.Allocate(p, "int8", [4, loom.var("n")], loom.var("x") > 0, S.no_op(), annotations={"k": 1})
    assert str(s) == "p = allocate([4, n], 'int8', 'global', condition=x > 0, annotations={'k': 1})\npass"


def _func():
    n = loom.var("n")
    A = loom.decl_buffer((n,), "float32", name="A")
    B = loom.decl_buffer((n, 4), "float16", name="B", strides=[loom.var("s"), 1], offset_factor=4, scope="global")
    i = loom.var("i")
    body = S.For(i, 0, n, "serial", S.BufferStore(A, A[i] * 2.0, [i]))
    return PrimFunc([A.data, B.data, n], body, buffer_map={A.data: A, B.data: B},
                    attrs={"global_symbol": "scale", "restricted": True})


def test_prim_func():
    assert str(_func()) == textwrap.dedent("""\
        @prim_func(attrs={'global_symbol': 'scale', 'restricted': True})
        def scale(A_handle: handle, B_handle: handle, n: int32):
            A = match_buffer(A_handle, [n], 'float32')
            B = match_buffer(B_handle, [n, 4], 'float16', strides=[s, 1], elem_offset=B_elem_offset, scope='global', offset_factor=4)
            for i in range(n):
                A[i] = A[i] * 2.0""")


def test_prim_func_with_separate_handles_and_return_type():
    A = loom.decl_buffer((4,), "float32", name="A")
    h = loom.var("a", "handle")
    f = PrimFunc([h], S.no_op(), ret_type="float32", buffer_map={h: A})
    assert str(f) == "@prim_func\ndef main(a: handle) -> float32:\n    A = match_buffer(a, [4], 'float32')\n    pass"


def test_module_sorts_functions_and_names_each_one_separately():
    mod = IRModule({"z": _func(), "a": _func()}, attrs={"system_lib": False})
    text = str(mod)
    assert text.startswith("# IRModule(attrs={'system_lib': False})\n\n@prim_func")
    assert text.index("def a(") < text.index("def z(")
    assert "A_handle_1" not in text and "i_1" not in text


@pytest.mark.parametrize("node, text", [
    (E.Range.from_min_extent(2, 8), "range(2, 10)"),
    (E.Range.from_min_extent(0, loom.var("n")), "range(0, n)"),
    (E.IterVar(E.Range.from_min_extent(0, 4), loom.var("k"), "reduce"), "iter_var(k, range(0, 4), 'reduce')"),
    (Array([c(1), E.StringImm("s"), Array([])]), "[1, 's', []]"),
    (Map({"b": c(1), "a": c(2.0)}), "{'a': 2.0, 'b': 1}"),
    (Op.get("exp"), "Op('tir.exp')"),
    (GlobalVar("helper"), "@helper"),
    (loom.decl_buffer((4,), "int8", name="Q", data_alignment=16), "Buffer(Q, [4], 'int8', data_alignment=16)"),
    (loom.decl_buffer((4,), name="Q", data=loom.var("ptr", "handle")), "Buffer(Q, [4], 'float32', data=ptr)"),
])
def test_other_nodes(node, text):
    assert str(node) == text


def test_plain_values_and_script():
    assert to_text([X, {"k": 1}]) == "[x, {'k': 1}]"
    assert to_text(None) == "None"
    assert _func().script() == str(_func())


@pytest.mark.parametrize("key", sorted(SAMPLES))
def test_every_node_type_prints_deterministically(key):
    a, b = SAMPLES[key](), SAMPLES[key]()
    text = str(a)
    assert text and "unprintable" not in text
    assert text == str(b)
    assert "unprintable" not in repr(a)


def test_corrupted_node_does_not_raise():
    loop = S.For(loom.var("i"), 0, 8, "serial", S.no_op())
    object.__setattr__(loop, "kind", "warp_speed")  # what a buggy pass might leave behind
    assert str(loop).startswith("<For (unprintable: ")
    add = X + 1
    object.__setattr__(add, "a", None)
    assert str(add) == "<NoneType> + 1"


def test_deep_expression_prints():
    e = X
    for k in range(3000):
        e = E.Add(e, I(k % 7))
    text = str(e)
    assert text.startswith("x + 0 + 1") and "(" not in text


# ---------------------------------------------------------------------------
# precedence: the text, read as Python, has the same tree as the IR

_ARITH = {"+": (E.Add, operator.add), "-": (E.Sub, operator.sub), "*": (E.Mul, operator.mul),
          "//": (E.FloorDiv, operator.floordiv), "%": (E.FloorMod, operator.mod)}
_VARS = {name: loom.var(name) for name in "abc"}

_int_trees = st.recursive(
    st.sampled_from("abc") | st.integers(-6, 6),
    lambda sub: st.tuples(st.sampled_from(sorted(_ARITH)), sub, sub),
    max_leaves=12,
)


def _build(tree):
    if isinstance(tree, str):
        return _VARS[tree]
    if isinstance(tree, int):
        return I(tree)
    op, lhs, rhs = tree
    return _ARITH[op][0](_build(lhs), _build(rhs))


def _evaluate(tree, env):
    if isinstance(tree, str):
        return env[tree]
    if isinstance(tree, int):
        return tree
    op, lhs, rhs = tree
    return _ARITH[op][1](_evaluate(lhs, env), _evaluate(rhs, env))


@settings(max_examples=300, deadline=None)
@given(_int_trees, st.fixed_dictionaries({k: st.integers(-20, 20) for k in "abc"}))
def test_printed_arithmetic_evaluates_like_the_tree(tree, env):
    try:
        expected = _evaluate(tree, env)
    except ZeroDivisionError:
        assume(False)
    assert eval(str(_build(tree)), {}, dict(env)) == expected  # noqa: S307 - our own printed text


_CMP = {"==": E.EQ, "!=": E.NE, "<": E.LT, "<=": E.LE, ">": E.GT, ">=": E.GE}
_cmp_trees = st.tuples(st.sampled_from(sorted(_CMP)), _int_trees, _int_trees)
_bool_trees = st.recursive(
    _cmp_trees,
    lambda sub: st.tuples(st.just("not"), sub) | st.tuples(st.sampled_from(["and", "or", "==", "!="]), sub, sub),
    max_leaves=6,
)


def _build_bool(tree):
    if len(tree) == 2:
        return E.Not(_build_bool(tree[1]))
    op, lhs, rhs = tree
    if op in ("and", "or"):
        return (E.And if op == "and" else E.Or)(_build_bool(lhs), _build_bool(rhs))
    build = _build if isinstance(lhs, (str, int)) or lhs[0] in _ARITH else _build_bool
    return _CMP[op](build(lhs), build(rhs))


def _shape_of_ir(e):
    if isinstance(e, E.Var):
        return e.name
    if isinstance(e, E.IntImm):
        return e.value
    if isinstance(e, E.Not):
        return ("Not", _shape_of_ir(e.a))
    return (type(e).__name__, _shape_of_ir(e.a), _shape_of_ir(e.b))


_AST_NAMES = {ast.Add: "Add", ast.Sub: "Sub", ast.Mult: "Mul", ast.FloorDiv: "FloorDiv", ast.Mod: "FloorMod",
              ast.Eq: "EQ", ast.NotEq: "NE", ast.Lt: "LT", ast.LtE: "LE", ast.Gt: "GT", ast.GtE: "GE",
              ast.And: "And", ast.Or: "Or"}


def _shape_of_ast(n):
    if isinstance(n, ast.Name):
        return n.id
    if isinstance(n, ast.Constant):
        return n.value
    if isinstance(n, ast.UnaryOp) and isinstance(n.op, ast.USub) and isinstance(n.operand, ast.Constant):
        return -n.operand.value
    if isinstance(n, ast.UnaryOp) and isinstance(n.op, ast.Not):
        return ("Not", _shape_of_ast(n.operand))
    if isinstance(n, ast.BinOp):
        return (_AST_NAMES[type(n.op)], _shape_of_ast(n.left), _shape_of_ast(n.right))
    if isinstance(n, ast.Compare):
        assert len(n.ops) == 1, "comparisons must never chain"
        return (_AST_NAMES[type(n.ops[0])], _shape_of_ast(n.left), _shape_of_ast(n.comparators[0]))
    if isinstance(n, ast.BoolOp):  # Python flattens `a and b and c`; the IR nests to the left
        out = _shape_of_ast(n.values[0])
        for v in n.values[1:]:
            out = (_AST_NAMES[type(n.op)], out, _shape_of_ast(v))
        return out
    raise AssertionError(f"unexpected syntax {ast.dump(n)}")


@settings(max_examples=300, deadline=None)
@given(_bool_trees)
def test_printed_logic_parses_to_the_same_tree(tree):
    e = _build_bool(tree)
    assert _shape_of_ast(ast.parse(str(e), mode="eval").body) == _shape_of_ir(e)
