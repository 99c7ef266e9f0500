"""One sample instance per registered node type, shared by the JSON and structural tests.

When a new node type is registered, add a sample here: ``test_every_registered_type_has_a_sample``
fails until you do.
"""

from __future__ import annotations

from typing import Any, Callable

import loom
from loom.ir import expr as E
from loom.ir import stmt as S
from loom.ir.container import Array, Map
from loom.ir.function import GlobalVar, IRModule, PrimFunc
from loom.ir.op import Op
from loom.ir.producer import ProducerRealize, ProducerStore
from loom.ir.reduce import CommReducer, Reduce
from loom.target import CompilationConfig, MemoryInfo, Target, VirtualDevice
from loom.te.operation import HybridOp
from loom.te.tensor import ComputeOp, ExternOp, PlaceholderOp

#: Type-key prefixes used by tests and doctests for throwaway types.
TEST_ONLY_PREFIXES = ("test.", "example.")


def _x() -> E.Var:
    return loom.var("x")


def _buf() -> Any:
    n = loom.size_var("n")
    return loom.decl_buffer((n, 4), "float32", name="A", strides=[loom.var("s0"), 1], offset_factor=4)


def _func() -> PrimFunc:
    n = loom.var("n")
    A = loom.decl_buffer((n,), "float32", name="A")
    i = loom.var("i")
    body = S.For(i, 0, n, "parallel", S.BufferStore(A, A[i] * 2.0, [i]), annotations={"pragma_unroll": 1})
    return PrimFunc([A.data, n], body, buffer_map={A.data: A}, attrs={"global_symbol": "f", "restricted": True})


def _hybrid() -> Any:
    P, out, tmp, i = _placeholder(), loom.placeholder((4,), name="out"), loom.placeholder((1,), name="tmp"), loom.var("i")
    body = ProducerRealize(tmp, [E.Range.from_min_extent(0, 1)], loom.const(True), S.For(i, 0, 4, "serial", S.seq(
        ProducerStore(tmp, P[0, i] * 2.0, [0]), ProducerStore(out, tmp[0] + 1.0, [i]))), "local")
    return HybridOp("hy", [P], [out], [E.IterVar(E.Range.from_min_extent(0, 4), i, "data_par")], body)


def _placeholder() -> Any:
    return PlaceholderOp("P", [loom.var("n"), 4], "float32").output(0)


def _sum() -> CommReducer:
    x, y = loom.var("x", "float32"), loom.var("y", "float32")
    return CommReducer([x], [y], [x + y], [loom.const(0.0)])


def _compute() -> Any:
    P = _placeholder()
    i = E.IterVar(E.Range.from_min_extent(0, P.shape[0]), loom.var("i"))
    k = E.IterVar(E.Range.from_min_extent(0, 4), loom.var("k"), "reduce")
    body = Reduce(_sum(), [P[i.var, k.var]], [k], loom.const(True))
    return ComputeOp("C", [i], [k], [body], tag="row_sum", attrs={"note": "x"}).output(0)


def _extern() -> Any:
    P = _placeholder()
    inp = loom.decl_buffer(P.shape, P.dtype, name="in")
    out = loom.decl_buffer(P.shape, P.dtype, name="out")
    body = S.BufferStore(out, inp[0, 0], [0, 0])
    return ExternOp("ext", [P], [inp], [out], body).output(0)


def _tensor_compute() -> Any:
    x = loom.placeholder((4,), name="vx")
    z = loom.compute((4,), lambda i: x[i] * 2.0, name="vz")
    double = loom.decl_tensor_intrin(z.op, lambda ins, outs: loom.call_packed("vdouble", ins[0].data, outs[0].data))
    A = loom.placeholder((3, 4), name="A")
    return loom.compute((3, 4), lambda i: double(A[i, 0:4]), name="C")


def _schedule_record() -> Any:
    """A schedule record with a relation, a loop attribute and a group."""
    from loom.te.schedule_json import schedule_record

    A = loom.placeholder((8, 8), name="A")
    B = loom.compute((8, 8), lambda i, j: A[i, j] + 1.0, name="B")
    C = loom.compute((8, 8), lambda i, j: B[i, j] * 2.0, name="C")
    s = loom.create_schedule(C.op)
    s.create_group(outputs=C, inputs=A)
    _, inner = s[C].split(C.op.axis[1], factor=4)
    s[C].unroll(inner)
    return schedule_record(s)


def _scan() -> Any:
    from loom.te.scan import scan

    state = loom.placeholder((loom.var("m"), 4), name="state")
    init = loom.compute((1, 4), lambda _, i: loom.const(0.0), name="init")
    update = loom.compute(state.shape, lambda t, i: state[t - 1, i] + 1.0, name="update")
    return scan(init, update, state, name="sc", tag="count", attrs={"note": "x"}).op


def _binary(cls: type) -> Callable[[], Any]:
    return lambda: cls(_x(), loom.const(3))


def _cmp_bool(cls: type) -> Callable[[], Any]:
    return lambda: cls(_x() > 1, _x() < 5)


SAMPLES: dict[str, Callable[[], Any]] = {
    "tir.Var": lambda: loom.var("v", "float16"),
    "tir.SizeVar": lambda: loom.size_var("n", "int64"),
    "tir.IntImm": lambda: loom.const(-(2**63), "int64"),
    "tir.FloatImm": lambda: loom.const(float("-inf"), "float64"),
    "tir.StringImm": lambda: E.StringImm("hello \"world\" \u00e9"),
    "tir.Cast": lambda: E.Cast(loom.DataType.of("float32"), _x()),
    **{f"tir.{c}": _binary(getattr(E, c)) for c in ("Add", "Sub", "Mul", "Div", "Mod", "FloorDiv", "FloorMod", "Min", "Max", "EQ", "NE", "LT", "LE", "GT", "GE")},
    "tir.And": _cmp_bool(E.And),
    "tir.Or": _cmp_bool(E.Or),
    "tir.Not": lambda: E.Not(_x() > 0),
    "tir.Select": lambda: E.Select(_x() > 0, _x(), loom.const(0)),
    "tir.BufferLoad": lambda: _buf()[loom.var("i"), 2],
    "tir.Ramp": lambda: E.Ramp(_x(), loom.const(2), 8),
    "tir.Broadcast": lambda: E.Broadcast(loom.const(1.5), 4),
    "tir.Shuffle": lambda: E.Shuffle([E.Ramp(_x(), loom.const(2), 4), _x() + 1], [4, 3, 0]),
    "tir.Let": lambda: (lambda v: E.Let(v, loom.const(2), v * v))(loom.var("t")),
    "tir.Call": lambda: loom.exp(loom.var("y", "float32")),
    "ir.Range": lambda: E.Range.from_min_extent(0, loom.var("n")),
    "tir.IterVar": lambda: E.IterVar(E.Range.from_min_extent(0, 32), loom.var("tx"), "thread_index", "threadIdx.x"),
    "Op": lambda: Op.get("tir.sqrt"),
    "tir.Buffer": _buf,
    "tir.LetStmt": lambda: (lambda v: S.LetStmt(v, loom.const(1), S.Evaluate(v + 1)))(loom.var("l")),
    "tir.AttrStmt": lambda: S.AttrStmt(_buf(), "storage_alignment", 64, S.no_op()),
    "tir.AssertStmt": lambda: S.AssertStmt(_x() > 0, "x must be positive", S.no_op()),
    "tir.BufferStore": lambda: (lambda A: S.BufferStore(A, A[0, 1] + 1.0, [0, 1]))(_buf()),
    "tir.Allocate": lambda: S.Allocate(loom.var("buf", "handle"), "int8", [16, 4], True, S.no_op(), "shared"),
    "tir.For": lambda: _func().body,
    "tir.While": lambda: S.While(_x() < 10, S.no_op()),
    "tir.IfThenElse": lambda: S.IfThenElse(_x() < 10, S.no_op(), S.Evaluate(loom.const(1))),
    "tir.Evaluate": lambda: S.Evaluate(loom.call_extern("int32", "puts", E.StringImm("hi"))),
    "tir.SeqStmt": lambda: S.SeqStmt([S.no_op(), S.Evaluate(_x())]),
    "ir.GlobalVar": lambda: GlobalVar("helper"),
    "tir.PrimFunc": _func,
    "ir.IRModule": lambda: IRModule({"f": _func(), "g": _func()}, attrs={"system_lib": False}),
    "ir.Array": lambda: Array([loom.const(1), _x(), E.StringImm("s")]),
    "ir.Map": lambda: Map({"a": loom.const(1), "b": Array([])}),
    "tir.CommReducer": _sum,
    "tir.Reduce": lambda: _compute().op.body[0],
    "tir.ProducerLoad": lambda: _placeholder()[loom.var("i"), 1],
    "tir.ProducerStore": lambda: (lambda P: ProducerStore(P, P[0, 1] * 2.0, [0, 1]))(_placeholder()),
    "tir.ProducerRealize": lambda: (lambda P: ProducerRealize(
        P, [E.Range.from_min_extent(0, P.shape[0]), E.Range.from_min_extent(0, 4)], loom.const(True),
        ProducerStore(P, loom.const(0.0), [0, 0]), "local"))(_placeholder()),
    "te.PlaceholderOp": lambda: _placeholder().op,
    "te.ComputeOp": lambda: _compute().op,
    "te.ExternOp": lambda: _extern().op,
    "te.HybridOp": _hybrid,
    "te.ScanOp": _scan,
    "te.TensorIntrin": lambda: _tensor_compute().op.intrin,
    "te.TensorComputeOp": lambda: _tensor_compute().op,
    "ir.EnvFunc": lambda: loom.ir.EnvFunc("sample.global.function"),  # by name: need not be registered
    "te.Tensor": _compute,
    # Targets use the built-in `interp` kind so the samples need no backend installed.
    "target.Target": lambda: Target("interp", host="interp"),
    "target.VirtualDevice": lambda: VirtualDevice("cpu", 0, Target("interp"), "global"),
    "target.CompilationConfig": lambda: CompilationConfig(None, "interp"),
    "te.ScheduleRecord": _schedule_record,
    "te.GroupRecord": lambda: _schedule_record().groups[0],
    "te.StageRecord": lambda: _schedule_record().stages[-1],
    "te.RelationRecord": lambda: _schedule_record().stages[-1].relations[0],
    "te.LoopAttrRecord": lambda: _schedule_record().stages[-1].loop_attrs[0],
    "target.MemoryInfo": lambda: MemoryInfo(unit_bits=16, max_simd_bits=32, max_num_bits=1024, head_address=_x()),
}

