"""Tensor intrinsics: a small computation and the code that performs it (``loom.decl_tensor_intrin``).

A :class:`TensorIntrin` pairs a compute operation (the *pattern*, e.g. a 16x64
matrix-vector product) with statements over buffers bound to its inputs and
outputs (the *implementation*, typically a call of a hand-written micro-kernel).
``s[C].tensorize(axis, intrin)`` checks that the loops of ``C`` under ``axis``
compute exactly the pattern and replaces them with the implementation
(see :mod:`loom.te.tensorize`).

The implementation comes in up to three parts, as in TVM:

* ``body``: computes the whole pattern, reduction included;
* ``reduce_init`` (TVM's ``reduce_reset``): sets the outputs to the reduction's start;
* ``reduce_update``: adds one part of the reduction to the outputs.

``body`` is used when the tensorized loops hold the whole reduction;
``reduce_init`` and ``reduce_update`` when outer loops split it.  Called on
regions of tensors, ``intrin(A[i, 0:16])``, an intrinsic is also a compute's
body (:mod:`loom.te.tensor_compute`).

>>> import loom
>>> a = loom.placeholder((4,), name="a")
>>> b = loom.compute((4,), lambda i: a[i] * 2.0, name="b")
>>> def double(ins, outs):
...     return loom.call_extern("int32", "double4", ins[0].access_ptr("r"), outs[0].access_ptr("w"))
>>> intrin = decl_tensor_intrin(b.op, double, name="double4")
>>> intrin.name, [buf.name for buf in intrin.buffers], intrin.reduce_update is None
('double4', ['a', 'b'], True)
"""

from __future__ import annotations

from typing import Any, Callable, Mapping, Optional, Sequence

from ..errors import LoomTypeError, LoomValueError
from ..ir import expr as E
from ..ir.buffer import Buffer, decl_buffer
from ..ir.node import Node, TupleOf, child, children, register_object
from ..ir.node import value as val
from ..ir.printer import register_node_printer
from ..ir.stmt import Evaluate, Stmt
from .tensor import ComputeOp, PlaceholderOp, Tensor

__all__ = ["TensorIntrin", "decl_tensor_intrin"]


@register_object("te.TensorIntrin")
class TensorIntrin(Node):
    """A compute pattern and the statements implementing it (build one with :func:`decl_tensor_intrin`).

    ``buffers`` are the declared buffers of ``inputs`` then of ``op``'s outputs;
    ``scalar_params`` are variables of the pattern that tensorize binds to the
    matching expressions of the tensorized stage.  Calling the intrinsic on
    regions of tensors, ``intrin(A[i, 0:16], B[i, 0:16])``, gives the body of a
    :class:`~loom.te.tensor_compute.TensorComputeOp` (see :meth:`__call__`).
    """

    name: str = val(str)
    op: ComputeOp = child(ComputeOp, reference=True)
    inputs: TupleOf[Tensor] = children(Tensor)
    buffers: TupleOf[Buffer] = children(Buffer)
    scalar_params: TupleOf[E.Var] = children(E.Var)
    body: Optional[Stmt] = child(Stmt, optional=True, default=None)
    reduce_init: Optional[Stmt] = child(Stmt, optional=True, default=None)
    reduce_update: Optional[Stmt] = child(Stmt, optional=True, default=None)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """``intrin(A[i, 0:16], B[i, 0:16], reduce_axis=k)``: the intrinsic on regions, a compute's body.

        Arguments are the regions of the intrinsic's inputs, in order (``A[i, 0:16]``,
        a partly indexed ``A[i]`` or a whole tensor), then its scalar parameters'
        values; ``reduce_axis`` names the reduction axes the regions use.  Return the
        call from ``loom.compute``'s fcompute, which takes the outer indices only
        (see :mod:`loom.te.tensor_compute`).
        """
        from .tensor_compute import call_intrin  # tensor_compute builds on this module

        return call_intrin(self, args, kwargs)


def _intrin_text(p: Any, t: TensorIntrin) -> str:
    return f"TensorIntrin({t.name}, {t.op.name})"


register_node_printer(TensorIntrin, _intrin_text)


def _as_stmt(part: Any, what: str) -> Optional[Stmt]:
    if part is None or isinstance(part, Stmt):
        return part
    if isinstance(part, E.PrimExpr):
        return Evaluate(part)
    raise LoomTypeError(f"decl_tensor_intrin {what}: fcompute must return a Stmt or an expression (a call), "
                        f"or a tuple (body, reduce_reset, reduce_update) of them; got {type(part).__name__}")


def _buffer_for(t: Tensor, binds: Mapping[Tensor, Buffer], what: str) -> Buffer:
    buf = binds.get(t)
    if buf is None:
        # A symbolic elem_offset (offset_factor at least 1): the intrinsic may work on any part of a tensor.
        from ..transform.pass_base import PassContext

        ctx = PassContext.current()
        return decl_buffer(t.shape, t.dtype, t.op.name, data_alignment=ctx.get_config("tir.data_alignment"),
                           offset_factor=max(1, ctx.get_config("tir.offset_factor")))
    if not isinstance(buf, Buffer):
        raise LoomTypeError(f"decl_tensor_intrin {what}: binds maps {t.name} to a {type(buf).__name__}, not a Buffer "
                            "(loom.decl_buffer)")
    if buf.dtype != t.dtype or buf.ndim != t.ndim:
        raise LoomValueError(f"decl_tensor_intrin {what}: the buffer {buf.name} bound to {t.name} is a {buf.ndim}-d "
                             f"{buf.dtype} buffer, but {t.name} is a {t.ndim}-d {t.dtype} tensor")
    return buf


def decl_tensor_intrin(op: Any, fcompute: Callable[..., Any], name: str = "tensor_intrin",
                       binds: Optional[Mapping[Tensor, Buffer]] = None,
                       scalar_params: Optional[Sequence[E.Var]] = None) -> TensorIntrin:
    """Declare a tensor intrinsic: the compute ``op`` is the pattern, ``fcompute`` the implementation.

    ``fcompute(ins, outs)`` (``fcompute(ins, outs, scalar_params)`` when those are
    given) receives one :class:`~loom.ir.Buffer` per input tensor of ``op`` and
    per output, and returns a statement or an expression (``loom.call_extern(...)``)
    computing the whole pattern, or a tuple ``(body, reduce_reset, reduce_update)``
    whose entries may be None.  ``binds`` gives some tensors their buffers (with
    symbolic strides ``[loom.var("s1"), 1]`` the intrinsic accepts rows of a
    larger matrix); the others get compact buffers with a symbolic ``elem_offset``, a multiple of
    ``build_config(offset_factor=...)`` when that is set.

    >>> import loom
    >>> x = loom.placeholder((8,), name="x")
    >>> k = loom.reduce_axis((0, 8), name="k")
    >>> s = loom.compute((1,), lambda i: loom.sum(x[k], axis=k), name="s")
    >>> def parts(ins, outs):
    ...     total = loom.call_extern("int32", "sum8", outs[0].access_ptr("w"), ins[0].access_ptr("r"))
    ...     return total, loom.call_extern("int32", "zero1", outs[0].access_ptr("w")), total
    >>> t = decl_tensor_intrin(s.op, parts, name="sum8")
    >>> [type(p).__name__ for p in (t.body, t.reduce_init, t.reduce_update)]
    ['Evaluate', 'Evaluate', 'Evaluate']
    """
    if isinstance(op, Tensor):
        op = op.op
    what = repr(name)
    if not isinstance(op, ComputeOp):
        raise LoomTypeError(f"decl_tensor_intrin {what}: the pattern must be a compute operation "
                            f"(loom.compute(...).op), got {type(op).__name__}")
    if not callable(fcompute):
        raise LoomTypeError(f"decl_tensor_intrin {what}: fcompute must be callable, got {type(fcompute).__name__}")
    binds = dict(binds or {})
    inputs = tuple(op.input_tensors)
    outputs = tuple(op.output(k) for k in range(op.num_outputs))
    for t in inputs:
        if not isinstance(t.op, PlaceholderOp):
            raise LoomValueError(f"decl_tensor_intrin {what}: the pattern reads {t.name}, which is computed; "
                                 "a pattern may only read placeholders")
    unknown = [getattr(t, "name", t) for t in binds if not any(t is x for x in inputs + outputs)]
    if unknown:
        raise LoomValueError(f"decl_tensor_intrin {what}: binds names {unknown}, which the pattern neither reads nor "
                             f"writes (it reads {[t.name for t in inputs]}, writes {[t.name for t in outputs]})")
    buffers = tuple(_buffer_for(t, binds, what) for t in inputs + outputs)
    params = tuple(scalar_params or ())
    if any(not isinstance(v, E.Var) for v in params):
        raise LoomTypeError(f"decl_tensor_intrin {what}: scalar_params must be variables (loom.var)")
    ins, outs = list(buffers[:len(inputs)]), list(buffers[len(inputs):])
    result = fcompute(ins, outs, list(params)) if params else fcompute(ins, outs)
    parts = list(result) if isinstance(result, (tuple, list)) else [result]
    if not 1 <= len(parts) <= 3:
        raise LoomValueError(f"decl_tensor_intrin {what}: fcompute returned {len(parts)} parts; expected a body or "
                             "(body, reduce_reset, reduce_update)")
    parts += [None] * (3 - len(parts))
    body, init, update = (_as_stmt(p, what) for p in parts)
    if body is None and update is None:
        raise LoomValueError(f"decl_tensor_intrin {what}: fcompute gave neither a body nor a reduce_update")
    return TensorIntrin(name, op, inputs, buffers, params, body, init, update)
