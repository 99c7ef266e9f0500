"""A tiny pointwise evaluator of tensor expressions, the numpy oracle of the te builder tests.

It evaluates a compute op's body at every point of its (constant) domain, walking the
expression tree directly; ProducerLoad reads numpy arrays (placeholders) or the
recursively evaluated producer.  Slow and small on purpose: shapes of a few elements.
"""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np

from loom.ir import expr as E
from loom.ir.producer import ProducerLoad
from loom.ir.reduce import Reduce
from loom.te.tensor import ComputeOp, PlaceholderOp, Tensor


def _scalar(dtype: Any, value: Any) -> Any:
    return np.dtype(str(dtype)).type(value)


_BINARY = {
    E.Add: lambda a, b: a + b, E.Sub: lambda a, b: a - b, E.Mul: lambda a, b: a * b,
    E.FloorDiv: lambda a, b: a // b, E.FloorMod: lambda a, b: a % b,
    E.Min: np.minimum, E.Max: np.maximum,
    E.EQ: lambda a, b: a == b, E.NE: lambda a, b: a != b, E.LT: lambda a, b: a < b,
    E.LE: lambda a, b: a <= b, E.GT: lambda a, b: a > b, E.GE: lambda a, b: a >= b,
    E.And: lambda a, b: bool(a) and bool(b), E.Or: lambda a, b: bool(a) or bool(b),
}


class Reference:
    """``Reference({A: a, B: b}).run(C)`` is C as a numpy array."""

    def __init__(self, inputs: dict[Tensor, np.ndarray]) -> None:
        self.values: dict[Tensor, np.ndarray] = dict(inputs)

    def run(self, t: Tensor) -> np.ndarray:
        if t not in self.values:
            op = t.op
            if isinstance(op, PlaceholderOp):
                raise KeyError(f"no input array for placeholder {t.name}")
            assert isinstance(op, ComputeOp), f"cannot evaluate {type(op).__name__}"
            shape = tuple(int(iv.dom.extent) for iv in op.axis)
            outs = [np.zeros(shape, dtype=str(op.output_dtype(k))) for k in range(op.num_outputs)]
            for index in itertools.product(*(range(n) for n in shape)):
                env = {iv.var: _scalar(iv.var.dtype, x) for iv, x in zip(op.axis, index)}
                for k in range(op.num_outputs):
                    outs[k][index] = self.eval(op.body[k], env)
            for k in range(op.num_outputs):
                self.values[op.output(k)] = outs[k]
        return self.values[t]

    def eval(self, e: E.PrimExpr, env: dict[E.Var, Any]) -> Any:
        if isinstance(e, (E.IntImm, E.FloatImm)):
            return np.bool_(e.value) if e.dtype.is_bool else _scalar(e.dtype, e.value)
        if isinstance(e, E.Var):
            return env[e]
        if isinstance(e, ProducerLoad):
            return self.run(e.producer)[tuple(int(self.eval(i, env)) for i in e.indices)]
        if isinstance(e, Reduce):
            return self._reduce(e, env)
        if isinstance(e, E.Div):
            a, b = self.eval(e.a, env), self.eval(e.b, env)
            return a / b if e.dtype.is_float else _scalar(e.dtype, int(a / b))
        if type(e) in _BINARY:
            return _BINARY[type(e)](self.eval(e.a, env), self.eval(e.b, env))
        if isinstance(e, E.Not):
            return not self.eval(e.a, env)
        if isinstance(e, E.Select):
            return self.eval(e.true_value if self.eval(e.condition, env) else e.false_value, env)
        if isinstance(e, E.Cast):
            return _scalar(e.dtype, self.eval(e.value, env))
        if isinstance(e, E.Call):
            return e.op.info.numpy_impl(*(self.eval(a, env) for a in e.args))
        raise NotImplementedError(type(e).__name__)

    def _reduce(self, r: Reduce, env: dict[E.Var, Any]) -> Any:
        comb = r.combiner
        acc = [self.eval(v, env) for v in (r.init or comb.identity_element)]
        ranges = [range(int(iv.dom.min), int(iv.dom.min) + int(iv.dom.extent)) for iv in r.axis]
        for point in itertools.product(*ranges):
            inner = {**env, **{iv.var: _scalar(iv.var.dtype, x) for iv, x in zip(r.axis, point)}}
            if not self.eval(r.condition, inner):
                continue
            src = [self.eval(s, inner) for s in r.source]
            frame = {**inner, **dict(zip(comb.lhs, acc)), **dict(zip(comb.rhs, src))}
            acc = [self.eval(x, frame) for x in comb.result]
        return acc[r.value_index]
