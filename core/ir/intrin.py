"""The intrinsic math and utility functions (``loom.exp``, ``loom.if_then_else``...).

Each is a registered :class:`~loom.ir.op.Op`; calling the Python function builds
a ``Call`` node.  The numpy implementations are what the reference interpreter
runs; backends lower the ops through their own rules.

>>> import loom
>>> x = loom.var("x", "float32")
>>> str(loom.exp(x))
'exp(x)'
"""

from __future__ import annotations

import math
import re
from typing import Any

import numpy as np

from ..errors import LoomTypeError, LoomValueError
from .dtype import DataType
from . import expr as E
from .expr_ops import convert_expr, _match
from .op import Op, register_op

__all__ = [
    "exp", "exp2", "log", "log2", "log10", "sqrt", "rsqrt", "sigmoid", "tanh", "sin", "cos",
    "power", "popcount", "floor", "ceil", "round", "trunc", "abs", "fabs", "erf", "isnan",
    "if_then_else", "reinterpret", "likely", "call_extern", "call_pure_extern", "call_llvm_pure_intrin",
    "call_llvm_intrin",
    "call_intrin", "call_pure_intrin", "call_packed", "packed_array",
]


def _float_unary(x: np.ndarray, f: Any) -> np.ndarray:
    x = np.asarray(x)
    with np.errstate(all="ignore"):
        if x.dtype.name == "bfloat16":
            return f(x.astype(np.float32)).astype(x.dtype)
        return f(x).astype(x.dtype)


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-x))


def _popcount(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x)
    u = x.view(np.dtype(f"uint{x.dtype.itemsize * 8}"))
    return np.bitwise_count(u).astype(x.dtype)


_erf = np.vectorize(math.erf, otypes=[np.float64])

_FLOAT_UNARY = {
    "tir.exp": np.exp, "tir.exp2": np.exp2, "tir.log": np.log, "tir.log2": np.log2, "tir.log10": np.log10,
    "tir.sqrt": np.sqrt, "tir.rsqrt": lambda x: 1.0 / np.sqrt(x), "tir.sigmoid": _sigmoid, "tir.tanh": np.tanh,
    "tir.sin": np.sin, "tir.cos": np.cos, "tir.floor": np.floor, "tir.ceil": np.ceil, "tir.round": np.round,
    "tir.trunc": np.trunc, "tir.fabs": np.fabs, "tir.erf": lambda x: _erf(x),
}

for _name, _impl in _FLOAT_UNARY.items():
    register_op(_name, 1, (lambda f: lambda x: _float_unary(x, f))(_impl), doc=f"elementwise {_name[4:]}")

register_op("tir.power", 2, lambda x, y: _float_unary(x, lambda a: np.power(a, np.asarray(y).astype(a.dtype))),
            doc="x ** y elementwise")
register_op("tir.abs", 1, lambda x: np.abs(np.asarray(x)), doc="absolute value (ints and floats)")
register_op("tir.popcount", 1, _popcount, doc="number of set bits")
register_op("tir.isnan", 1, lambda x: np.isnan(np.asarray(x)), doc="true where x is NaN")
register_op("tir.if_then_else", 3, lambda c, t, f: np.where(c, t, f),
            doc="condition ? t : f, evaluating only the taken side")
register_op("tir.reinterpret", 1, None, doc="the bits of x read as another dtype of the same width")
register_op("tir.likely", 1, lambda x: x, doc="a branch-prediction hint; the value itself")
register_op("tir.call_extern", -1, None, pure=False, doc="call an external C function by name")
register_op("tir.call_pure_extern", -1, None, doc="call an external side-effect-free C function")
register_op("tir.call_llvm_pure_intrin", -1, None,
            doc="call a side-effect-free LLVM intrinsic by name (``llvm.exp``), overloaded on its first operand's type")
register_op("tir.call_llvm_intrin", -1, None, pure=False,
            doc="call an LLVM intrinsic that may have side effects (``llvm.prefetch``), overloaded as above")
register_op("tir.tvm_tuple", -1, None, doc="a tuple of values carried by an AttrStmt (storage_align...)")
register_op("tir.call_packed", -1, None, pure=False,
            doc="call the global function (loom.register_func) named by the first argument; int32 status 0")
register_op("tir.packed_array", -1, None,
            doc="a buffer passed to call_packed: data, dtype, ndim, elem_offset, shape..., strides...")
# Warp collectives (CUDA's __shfl_down_sync / __shfl_sync / __activemask); impure: never hoisted out of the
# uniform control flow that every lane of the mask runs.  The interpreter runs them as collectives (_gpu).
register_op("tir.tvm_warp_shuffle_down", 5, None, pure=False,
            doc="(mask, value, delta, width, warp_size): the value of lane l + delta within l's segment of "
                "width lanes, else l's own value")
register_op("tir.tvm_warp_shuffle", 5, None, pure=False,
            doc="(mask, value, src_lane, width, warp_size): the value of lane src_lane % width of l's segment")
register_op("tir.tvm_warp_activemask", 0, None, pure=False, doc="the mask of the lanes of the warp running now")


#: TVM v0.6 intrinsic names that Loom registers under another name.
CLASSIC_INTRINSIC_NAMES = {"tvm_if_then_else": "if_then_else", "pow": "power", "tvm_address_of": "address_of"}


def call_intrin(dtype: Any, op: str | Op, *args: Any) -> E.Call:
    """Call the registered intrinsic ``op`` with result type ``dtype`` (TVM's ``call_intrin``).

    ``op`` is an :class:`~loom.ir.op.Op` or its name, with or without ``tir.``;
    TVM v0.6's spellings (:data:`CLASSIC_INTRINSIC_NAMES`, e.g. ``tvm_if_then_else``)
    are accepted too.  Whether the call has side effects is the intrinsic's own
    property (``Op.info.pure``), whichever of this or :func:`call_pure_intrin` made it.
    A wrong number of arguments, or a float math intrinsic (``exp``, ``sqrt``...) given
    other than one float type throughout, is a :class:`~loom.errors.LoomTypeError`.

    >>> import loom
    >>> x = loom.var("x", "float32")
    >>> loom.call_intrin("float32", "exp", x)
    exp(x)
    >>> loom.call_pure_intrin("int32", "tvm_if_then_else", x > 0.0, 1, 2)
    if_then_else(x > 0.0, 1, 2)
    """
    if not isinstance(op, Op):
        op = Op.get(CLASSIC_INTRINSIC_NAMES.get(op, op))
    out = DataType.of(dtype)
    values = [convert_expr(a) if not isinstance(a, str) else E.StringImm(a) for a in args]
    info = op.info
    if info.num_inputs >= 0 and len(values) != info.num_inputs:
        raise LoomTypeError(f"{op.name} takes {info.num_inputs} argument(s), got {len(values)}")
    short = op.name.removeprefix("tir.")
    if short in _FLOAT_OPS and not all(v.dtype == out and out.is_float for v in values):
        got = ", ".join(str(v.dtype) for v in values)
        raise LoomTypeError(f"{op.name} computes in one float type: the result is {out} and the arguments are "
                            f"{got}; cast them first")
    return E.Call(out, op, values)


def call_pure_intrin(dtype: Any, op: str | Op, *args: Any) -> E.Call:
    """TVM's ``call_pure_intrin``: :func:`call_intrin` (purity is the intrinsic's own, see there).

    >>> import loom
    >>> loom.call_pure_intrin("float32", "sqrt", loom.var("x", "float32"))
    sqrt(x)
    """
    return call_intrin(dtype, op, *args)


#: Intrinsics whose operands and result are one float type: every name _float_call builds a function for.
_FLOAT_OPS: set[str] = set()

#: Float intrinsics whose result is exact (the same bits from numpy, libm and vector code): constants fold.
_EXACT = frozenset({"floor", "ceil", "round", "trunc", "fabs"})


def _float_call(name: str):
    _FLOAT_OPS.add(name)

    def build(x: Any) -> E.PrimExpr:
        x = convert_expr(x)
        if not x.dtype.is_float:
            raise LoomTypeError(f"loom.{name} needs a float argument, got {x.dtype}; cast it first")
        if name in _EXACT and isinstance(x, E.FloatImm):  # exact on every backend: fold (ceil(3.55) is 4.0)
            impl = Op.get(f"tir.{name}").info.numpy_impl
            if impl is not None:
                return E.FloatImm(x.dtype, float(impl(np.array(x.value, x.dtype.numpy()))))
        return E.Call(x.dtype, Op.get(f"tir.{name}"), [x])

    build.__name__ = name
    build.__doc__ = f"Elementwise ``{name}`` of a float expression (a ``tir.{name}`` call)."
    return build


exp, exp2, log, log2, log10 = (_float_call(n) for n in ("exp", "exp2", "log", "log2", "log10"))
sqrt, rsqrt, sigmoid, tanh = (_float_call(n) for n in ("sqrt", "rsqrt", "sigmoid", "tanh"))
sin, cos, floor, ceil, round, trunc = (_float_call(n) for n in ("sin", "cos", "floor", "ceil", "round", "trunc"))  # noqa: A001
fabs, erf = _float_call("fabs"), _float_call("erf")


def power(x: Any, y: Any) -> E.PrimExpr:
    """``x ** y`` for floats."""
    x, y = _match(convert_expr(x) if not isinstance(x, E.PrimExpr) else x, y)
    if not x.dtype.is_float:
        raise LoomTypeError(f"loom.power needs float arguments, got {x.dtype}")
    return E.Call(x.dtype, Op.get("tir.power"), [x, y])


def abs(x: Any) -> E.PrimExpr:  # noqa: A001
    """Absolute value; identity on unsigned integers."""
    x = convert_expr(x)
    if x.dtype.is_uint or x.dtype.is_bool:
        return x
    if isinstance(x, E.IntImm):
        return E.IntImm(x.dtype, -x.value if x.value < 0 else x.value)
    if isinstance(x, E.FloatImm):
        return E.FloatImm(x.dtype, -x.value if x.value < 0 else x.value)
    return E.Call(x.dtype, Op.get("tir.abs"), [x])


def popcount(x: Any) -> E.PrimExpr:
    """Number of set bits of an integer."""
    x = convert_expr(x)
    if not x.dtype.is_integer:
        raise LoomTypeError(f"loom.popcount needs an integer argument, got {x.dtype}")
    return E.Call(x.dtype, Op.get("tir.popcount"), [x])


def isnan(x: Any) -> E.PrimExpr:
    """True where a float is NaN (always false for integers)."""
    x = convert_expr(x)
    if not x.dtype.is_float:
        return E.IntImm("bool", 0) if x.dtype.lanes == 1 else E.Broadcast(E.IntImm("bool", 0), x.dtype.lanes)
    return E.Call(DataType("bool", 1, x.dtype.lanes), Op.get("tir.isnan"), [x])


def if_then_else(cond: Any, t: Any, f: Any) -> E.PrimExpr:
    """Like :func:`loom.select`, but only the taken side is evaluated (guards loads)."""
    cond = convert_expr(cond)
    if not cond.dtype.is_bool:
        raise LoomTypeError(f"if_then_else condition must be bool, got {cond.dtype}")
    t, f = _match(t, f)
    if isinstance(cond, E.IntImm):
        return t if cond.value else f
    return E.Call(t.dtype, Op.get("tir.if_then_else"), [cond, t, f])


def reinterpret(dtype: Any, x: Any) -> E.PrimExpr:
    """The bits of ``x`` read as ``dtype`` (same total width)."""
    t, x = DataType.of(dtype), convert_expr(x)
    if t.bits * t.lanes != x.dtype.bits * x.dtype.lanes:
        raise LoomTypeError(f"reinterpret from {x.dtype} to {t}: widths differ")
    return E.Call(t, Op.get("tir.reinterpret"), [x])


def likely(cond: Any) -> E.PrimExpr:
    """Mark a condition as likely true (a hint for loop partitioning and codegen)."""
    cond = convert_expr(cond)
    return E.Call(cond.dtype, Op.get("tir.likely"), [cond])


def call_extern(dtype: Any, func_name: str, *args: Any) -> E.Call:
    """Call the external function ``func_name`` (the first argument is its name)."""
    return call_intrin(dtype, "tir.call_extern", E.StringImm(func_name), *args)


def call_pure_extern(dtype: Any, func_name: str, *args: Any) -> E.Call:
    """Call the side-effect-free external function ``func_name`` (may be hoisted or dropped).

    >>> import loom
    >>> str(call_pure_extern("float32", "expf", loom.var("x", "float32")))
    "call_pure_extern('float32', 'expf', x)"
    """
    return call_intrin(dtype, "tir.call_pure_extern", E.StringImm(func_name), *args)


def call_llvm_pure_intrin(dtype: Any, intrinsic: str, *args: Any) -> E.Call:
    """Call the LLVM intrinsic ``intrinsic`` (``"llvm.exp"``) on ``args``; the llvm backend mangles the
    overload from the first operand's type (``llvm.exp.v8f32``).

    >>> import loom
    >>> call_llvm_pure_intrin("float32", "llvm.sqrt", loom.var("x", "float32")).args[0].value
    'llvm.sqrt'
    """
    return call_intrin(dtype, "tir.call_llvm_pure_intrin", E.StringImm(intrinsic), *args)


_LLVM_TYPE_SUFFIX = re.compile(r"^(v\d+)?(i\d+|f16|f32|f64|bf16|p0)$")


def call_llvm_intrin(dtype: Any, intrinsic: str, *args: Any) -> E.Call:
    """Call the LLVM intrinsic ``intrinsic`` (TVM's ``call_llvm_intrin``), on the llvm backend only.

    The overload is mangled from the first operand's type, so type suffixes in
    the name are optional (``"llvm.ctpop.i8"`` and ``"llvm.ctpop"`` are the same
    call).  TVM's leading ``const(1, "uint32")`` (the number of operands whose
    types pick the overload) is accepted; Loom overloads on one operand.  The
    call may have side effects (use :func:`call_llvm_pure_intrin` for math).

    >>> import loom
    >>> x = loom.var("x", "uint8x8")
    >>> str(loom.call_llvm_intrin("uint8x8", "llvm.ctpop.i8", loom.const(1, "uint32"), x))
    "call_llvm_intrin('uint8x8', 'llvm.ctpop', x)"
    """
    if not isinstance(intrinsic, str) or not intrinsic.startswith("llvm."):
        raise LoomValueError(f"call_llvm_intrin: the intrinsic name must start with 'llvm.', got {intrinsic!r}")
    parts = intrinsic.split(".")
    while len(parts) > 2 and _LLVM_TYPE_SUFFIX.match(parts[-1]):
        parts.pop()
    operands = list(args)
    first = operands[0] if operands else None
    if isinstance(first, E.IntImm) and first.dtype == "uint32" and len(operands) > 1:
        if first.value != 1:
            raise LoomValueError(f"call_llvm_intrin({intrinsic!r}): Loom picks the overload from the first "
                                 f"operand's type only; TVM's signature count must be 1, got {first.value}")
        operands = operands[1:]
    if not operands:
        raise LoomValueError(f"call_llvm_intrin({intrinsic!r}) needs an operand to overload on")
    return call_intrin(dtype, "tir.call_llvm_intrin", E.StringImm(".".join(parts)), *operands)


def packed_array(buf: Any) -> E.Call:
    """The ``tir.packed_array`` describing buffer ``buf`` to a packed call.

    Its arguments are ``data, dtype, ndim, elem_offset, shape..., strides...``;
    a compact buffer gets its row-major strides, so there are always ``ndim``.

    >>> import loom
    >>> print(packed_array(loom.decl_buffer((2, 3), "float32", name="A")))
    packed_array(A, 'float32', 2, 0, 2, 3, 3, 1, dtype='handle')
    """
    from .buffer import Buffer  # buffer imports the expression helpers this module does

    if not isinstance(buf, Buffer):
        raise LoomTypeError(f"packed_array needs a Buffer, got {type(buf).__name__}")
    shape = [convert_expr(x) for x in buf.shape]
    strides = [convert_expr(x) for x in buf.strides]
    if not strides:
        stride: E.PrimExpr = E.IntImm(shape[-1].dtype if shape else "int32", 1)
        for extent in reversed(shape):
            strides.insert(0, stride)
            stride = stride * extent
    return E.Call(DataType.of("handle"), Op.get("tir.packed_array"),
                  [buf.data, E.StringImm(str(buf.dtype)), E.IntImm("int32", len(shape)),
                   convert_expr(buf.elem_offset), *shape, *strides])


def call_packed(*args: Any) -> E.Call:
    """Call the global function named ``args[0]`` (see :func:`loom.register_func`) with ``args[1:]``.

    A Buffer argument reaches the function as a :class:`loom.nd.NDArray` viewing
    the buffer's memory (no copy), a str as a str, and a scalar as a Python
    int, float or bool.  The call's value is 0 (int32); when the function
    raises, the kernel stops and its caller gets a
    :class:`loom.runtime.packed.PackedFuncError`.  Typically the body of an extern op:

    >>> import loom
    >>> A = loom.placeholder((8,), name="A")
    >>> B = loom.extern(A.shape, [A], lambda ins, outs: call_packed("my.addone", ins[0], outs[0]), name="B")
    >>> print(B.op.body)
    call_packed('my.addone', packed_array(A, 'float32', 1, 0, 8, 1, dtype='handle'), packed_array(B, ...), ...)
    """
    from .buffer import Buffer

    if not args or not isinstance(args[0], (str, E.StringImm)):
        got = type(args[0]).__name__ if args else "nothing"
        raise LoomTypeError(f"call_packed needs the function name (a str) first, got {got}")
    name = args[0] if isinstance(args[0], E.StringImm) else E.StringImm(args[0])
    if not name.value:
        raise LoomValueError("call_packed: the function name must not be empty")
    items: list[E.PrimExpr] = [name]
    for k, a in enumerate(args[1:], 1):
        if isinstance(a, Buffer):
            items.append(packed_array(a))
            continue
        if isinstance(a, str):
            items.append(E.StringImm(a))
            continue
        try:
            x = convert_expr(a)
        except LoomTypeError as err:
            raise LoomTypeError(f"call_packed({name.value!r}): argument {k} must be a Buffer, a str or a scalar "
                                f"expression, got {type(a).__name__} ({err})") from None
        if x.dtype.lanes != 1:
            raise LoomTypeError(f"call_packed({name.value!r}): argument {k} is a vector ({x.dtype}); "
                                "packed calls take scalars and buffers")
        items.append(x)
    return E.Call(DataType.of("int32"), Op.get("tir.call_packed"), items)
