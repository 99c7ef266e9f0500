"""verify_well_formed: a well-formed function passes; each rule names what it found."""

import pytest

import loom
from loom.errors import LoomTypeError, VerifyError
from loom.ir import expr as E
from loom.ir import stmt as S
from loom.ir.function import GlobalVar, IRModule, PrimFunc
from loom.ir.op import Op
from loom.ir.verify import is_well_formed, verify_well_formed

c = loom.const


def _corrupt(node, **fields):
    """Set fields behind the constructor's back, as a buggy pass or a bad file could."""
    for name, v in fields.items():
        object.__setattr__(node, name, v)
    return node


def _func(body_of, shape=None):
    """A function over A (float32[n]) and n; ``body_of(A, n)`` builds the body."""
    n = loom.var("n")
    A = loom.decl_buffer(shape or (n,), "float32", name="A")
    return PrimFunc([A.data, n], body_of(A, n), buffer_map={A.data: A})


def _problems(f):
    with pytest.raises(VerifyError) as info:
        verify_well_formed(f)
    return info.value.problems


def _one_problem(f, *fragments):
    problems = _problems(f)
    assert len(problems) == 1, problems
    for fragment in fragments:
        assert fragment in problems[0], problems[0]
    return problems[0]


def test_well_formed_function_passes():
    def body(A, n):
        i, j, v = loom.var("i"), loom.var("j"), loom.var("v")
        buf = loom.var("T", "handle")
        T = loom.decl_buffer((4,), "float32", name="T", data=buf)
        tx = E.IterVar(E.Range.from_min_extent(0, 4), loom.var("tx"), "thread_index", "threadIdx.x")
        inner = S.seq(
            S.BufferStore(T, A[i], [E.FloorMod(i, c(4))]),
            S.IfThenElse(i < n - 1, S.BufferStore(A, loom.select(i > 0, T[0], 1.0), [i]), S.Evaluate(v)),
            S.For(j, 0, 4, "thread_binding", S.Evaluate(j + tx.var), thread_tag="threadIdx.y"),
            S.While(i < 0, S.no_op()),
        )
        loop = S.For(i, 0, n, "serial", S.Allocate(buf, "float32", [4], True, inner, "local"))
        return S.LetStmt(v, n * 2, S.AssertStmt(n > 0, "n > 0", S.AttrStmt(tx, "thread_extent", 4, loop)))

    f = _func(body)
    assert verify_well_formed(f) is True
    assert is_well_formed(f) and is_well_formed(IRModule({"f": f}))


def test_buffer_map_defines_data_shape_stride_and_offset_vars():
    n, s, p = loom.var("n"), loom.var("s"), loom.var("p", "handle")
    A = loom.decl_buffer((n, 4), "float32", name="A", strides=[s, 1], offset_factor=4)
    i = loom.var("i")
    body = S.For(i, 0, n * s + A.elem_offset, "serial", S.Evaluate(loom.call_extern("int32", "use", A.data, i)))
    assert is_well_formed(PrimFunc([p], body, buffer_map={p: A}))


def test_undefined_variable():
    j = loom.var("j")
    f = _func(lambda A, n: S.BufferStore(A, A[j], [0]))
    _one_problem(f, "main.body.value.indices[0]", "variable j is not defined")


def test_undefined_variable_is_reported_once():
    j = loom.var("j")
    f = _func(lambda A, n: S.seq(S.Evaluate(j), S.Evaluate(j + 1)))
    _one_problem(f, "main.body.seq[0].value", "variable j")


def test_use_outside_the_binding_scope():
    i = loom.var("i")
    f = _func(lambda A, n: S.seq(S.For(i, 0, n, "serial", S.Evaluate(i)), S.Evaluate(i)))
    _one_problem(f, "main.body.seq[1].value", "variable i is used outside the scope of its binding at "
                                              "main.body.seq[0].loop_var")


def test_let_expression_var_is_scoped_to_its_body():
    t = loom.var("t")
    f = _func(lambda A, n: S.Evaluate(E.Let(t, n, t + 1) + t))
    _one_problem(f, "main.body.value.b", "variable t is used outside the scope")


def test_loop_var_bound_twice():
    i = loom.var("i")
    f = _func(lambda A, n: S.seq(S.For(i, 0, n, "serial", S.no_op()), S.For(i, 0, n, "serial", S.no_op())))
    _one_problem(f, "main.body.seq[1].loop_var", "variable i is bound twice (SSA): first bound at main.body.seq[0].loop_var")


def test_nested_rebinding():
    v = loom.var("v")
    f = _func(lambda A, n: S.LetStmt(v, n, S.LetStmt(v, n + 1, S.Evaluate(v))))
    _one_problem(f, "main.body.body.var", "variable v is re-bound inside its own scope (SSA)")


def test_parameter_rebound_by_a_loop():
    def body(A, n):
        return S.For(n, 0, 4, "serial", S.no_op())

    _one_problem(_func(body), "variable n is re-bound inside its own scope", "first bound at main.params[1]")


def test_thread_var_may_be_rebound_by_sibling_kernels_only():
    tx = E.IterVar(None, loom.var("tx"), "thread_index", "threadIdx.x")

    def launch(body):
        return S.AttrStmt(tx, "thread_extent", 32, body)

    siblings = _func(lambda A, n: S.seq(launch(S.Evaluate(tx.var)), launch(S.Evaluate(tx.var + 1))))
    assert is_well_formed(siblings)
    nested = _func(lambda A, n: launch(launch(S.Evaluate(tx.var))))
    _one_problem(nested, "main.body.body.node.var", "variable tx is re-bound inside its own scope")


def test_thread_extent_must_annotate_an_iter_var():
    f = _func(lambda A, n: S.AttrStmt(loom.var("tx"), "thread_extent", 32, S.no_op()))
    _one_problem(f, "main.body.node", "thread_extent must annotate an IterVar, got Var")


def test_attr_node_is_a_reference_not_a_use():
    p = loom.var("buf", "handle")
    f = _func(lambda A, n: S.AttrStmt(p, "storage_scope", "shared", S.Allocate(p, "int8", [4], True, S.no_op())))
    assert is_well_formed(f)


def test_load_index_count():
    f = _func(lambda A, n: S.Evaluate(A[0, 1]))
    _one_problem(f, "main.body.value", "load from A has 2 indices for a 1-d buffer")


def test_store_index_count():
    def body(A, n):
        return _corrupt(S.BufferStore(A, c(1.0), [0]), indices=(c(0), c(1)))

    _one_problem(_func(body), "main.body", "store to A has 2 indices for a 1-d buffer")


def test_index_dtype_must_be_integer():
    def body(A, n):
        load = _corrupt(A[0], indices=(c(0.5),))
        return S.Evaluate(load)

    _one_problem(_func(body), "main.body.value.indices[0]", "index 0 of A has dtype float32; indices must be integers")


def test_vector_index_lanes_must_agree():
    B = loom.decl_buffer((8, 8), "float32", name="B")
    idx = [E.Ramp(c(0), c(1), 4), E.Ramp(c(0), c(1), 8)]
    f = PrimFunc([B.data], S.BufferStore(B, E.Broadcast(c(0.0), 8), idx), buffer_map={B.data: B})
    _one_problem(f, "main.body", "vector indices of B disagree in lanes: [4, 8]")


def test_store_value_lanes_must_match_the_indices():
    def body(A, n):
        return _corrupt(S.BufferStore(A, c(1.0), [0]), value=E.Broadcast(c(1.0), 4))

    _one_problem(_func(body), "main.body.value", "store to A: value is float32x4 but the indices select float32 (1 lane)")


def test_undeclared_buffer():
    B = loom.decl_buffer((4,), "float32", name="B")
    f = _func(lambda A, n: S.seq(S.BufferStore(B, A[0], [0]), S.BufferStore(B, A[1], [1])))
    _one_problem(f, "main.body.seq[0].buffer", "buffer B is not declared: it is not in buffer_map")


def test_buffer_whose_data_var_is_a_parameter_is_declared():
    B = loom.decl_buffer((4,), "float32", name="B")
    assert is_well_formed(PrimFunc([B.data], S.BufferStore(B, c(0.0), [0])))


def test_buffer_shape_vars_must_be_defined_where_it_is_used():
    m, p = loom.var("m"), loom.var("p", "handle")
    T = loom.decl_buffer((m,), "float32", name="T", data=p)
    f = _func(lambda A, n: S.Allocate(p, "float32", [4], True, S.BufferStore(T, c(0.0), [0])))
    _one_problem(f, "main.body.body.buffer.shape[0]", "variable m is not defined")


def test_buffer_map_compound_shape_needs_defined_vars():
    n, m = loom.var("n"), loom.var("m")
    A = loom.decl_buffer((n * m,), "float32", name="A")
    f = PrimFunc([A.data, n], S.no_op(), buffer_map={A.data: A})
    _one_problem(f, "main.buffer_map[A].shape[0].b", "variable m is not defined")


def test_for_dtypes_must_agree():
    i = loom.var("i")
    f = _func(lambda A, n: _corrupt(S.For(i, 0, 8, "serial", S.no_op()), extent=c(8, "int64")))
    _one_problem(f, "main.body.extent", "For i: extent is int64 but the loop var is int32")


def test_loop_var_must_be_an_integer():
    x = loom.var("x", "float32")
    f = _func(lambda A, n: _corrupt(S.For(loom.var("i"), 0, 8, "serial", S.no_op()), loop_var=x,
                                    min=c(0.0), extent=c(8.0)))
    _one_problem(f, "main.body", "loop var x has dtype float32; loop vars must be scalar integers")


def test_thread_binding_loop_needs_a_tag():
    tx = loom.var("tx")
    loop = S.For(tx, 0, 32, "thread_binding", S.no_op(), thread_tag="threadIdx.x")
    f = _func(lambda A, n: _corrupt(loop, thread_tag=""))
    _one_problem(f, "main.body", "thread_binding loop tx has no thread_tag")


@pytest.mark.parametrize("build, fragments", [
    (lambda n: S.IfThenElse(n > 0, S.no_op()), ("main.body.condition", "IfThenElse condition must be a scalar bool, got int32")),
    (lambda n: S.While(n > 0, S.no_op()), ("main.body.condition", "While condition")),
    (lambda n: S.AssertStmt(n > 0, "m", S.no_op()), ("main.body.condition", "AssertStmt condition")),
    (lambda n: S.Evaluate(loom.select(n > 0, n, 1)), ("main.body.value.condition", "Select condition must be a scalar bool")),
])
def test_conditions_must_be_bool(build, fragments):
    def body(A, n):
        node = build(n)
        target = node.value if isinstance(node, S.Evaluate) else node
        _corrupt(target, condition=n)
        return node

    _one_problem(_func(body), *fragments)


def test_vector_select_may_take_a_vector_condition():
    r = E.Ramp(c(0), c(1), 4)
    f = _func(lambda A, n: S.Evaluate(E.Select(r < E.Broadcast(n, 4), r, E.Broadcast(c(0), 4))))
    assert is_well_formed(f)


def test_let_var_must_match_its_value():
    v = loom.var("v")
    f = _func(lambda A, n: _corrupt(S.LetStmt(v, n, S.no_op()), value=c(1.5)))
    _one_problem(f, "main.body", "let var v is int32 but its value is float32")


def test_operands_must_agree():
    f = _func(lambda A, n: S.Evaluate(_corrupt(n + 1, b=c(1, "int64"))))
    _one_problem(f, "main.body.value", "Add operands differ in dtype: int32 and int64")


def test_call_arity():
    f = _func(lambda A, n: S.Evaluate(E.Call("float32", Op.get("tir.exp"), [A[0], A[1]])))
    _one_problem(f, "main.body.value", "call of tir.exp with 2 arguments; it takes 1")


def test_module_calls_must_name_module_functions():
    good = _func(lambda A, n: S.Evaluate(E.Call("int32", GlobalVar("helper"), [n])))
    mod = IRModule({"main": good, "helper": _func(lambda A, n: S.no_op())})
    assert is_well_formed(mod)
    bad = IRModule({"main": good})
    with pytest.raises(VerifyError, match="IRModule is not well formed") as info:
        verify_well_formed(bad)
    assert info.value.problems == ["main.body.value: call of @helper, which is not a function of the module"]


def test_every_problem_is_listed():
    j, k = loom.var("j"), loom.var("k")
    f = _func(lambda A, n: S.seq(S.Evaluate(j), S.Evaluate(A[k, 0])))
    with pytest.raises(VerifyError, match=r"PrimFunc 'main' is not well formed \(3 problems\)") as info:
        verify_well_formed(f)
    text = str(info.value)
    assert "variable j" in text and "variable k" in text and "2 indices for a 1-d buffer" in text


def test_assert_mode_false_returns_false():
    f = _func(lambda A, n: S.Evaluate(loom.var("j")))
    assert verify_well_formed(f, assert_mode=False) is False
    assert is_well_formed(f) is False


def test_deep_ir_does_not_overflow():
    n = loom.var("n")
    vs = [loom.var(f"v{k}") for k in range(5000)]
    body = S.Evaluate(vs[-1])
    for k in reversed(range(len(vs))):
        body = S.LetStmt(vs[k], vs[k - 1] + 1 if k else n, body)
    assert is_well_formed(PrimFunc([n], body))


def test_rejects_other_inputs():
    with pytest.raises(LoomTypeError, match="expects a PrimFunc or an IRModule, got Evaluate"):
        verify_well_formed(S.no_op())
