"""Tensor annotations of kernel arguments: ``T.Tensor``, ``T.StridedTensor``, ``T.Buffer`` and on-chip buffers.

A tensor parameter's annotation fixes what it can (dtype, rank, sizes, the
strides policy) and leaves the rest to the argument: what it leaves open and
static (a dtype, the sizes of a bare ``T.Tensor``) is part of the cache key;
names in shapes are runtime sizes shared across arguments (``"N"``), or the
value of a static parameter of that name.

>>> import loom.language as T
>>> T.Tensor[(4, "N"), "float32"], T.StridedTensor[("M", "N"), ("s", 1), "int8"]
(T.Tensor[(4, N), 'float32'], T.StridedTensor[(M, N), (s, 1), 'int8'])
"""

from __future__ import annotations

from typing import Any, Callable, Optional, Sequence

import numpy as np

from ..errors import LoomTypeError, LoomValueError
from ..ir import expr as E
from ..ir.buffer import Buffer as IRBuffer
from ..ir.buffer import decl_buffer
from ..ir.dtype import DataType
from .annot import Annot, ArgVarTable, DynAnnot, KeyParser, _is_dtype_like, _is_dtype_text, _no_key
from .arrays import array_facts, is_array, noncompact_strides
from .dtypes import normalize_dtype

__all__ = ["BufferAnnot", "TensorAnnot", "StridedTensorAnnot", "FragmentBufferAnnot", "SharedBufferAnnot",
           "LocalBufferAnnot", "TIRAnnot", "Buffer"]


_BUFFER_OPTIONS = ("data", "elem_offset", "scope", "align", "offset_factor", "buffer_type", "axis_separators")


class BufferAnnot(Annot):
    """A tensor argument: ``shape`` (None: from the argument, static), ``strides``, ``dtype`` (None: from it)."""

    shape: Optional[tuple] = None
    strides: Optional[tuple] = None
    dtype: Any = None
    _scope = "global"
    _spelling = "T.Buffer"

    def __init__(self, shape: Optional[Sequence[Any]] = None, strides: Optional[Sequence[Any]] = None,
                 dtype: Any = None, name: Optional[str] = None, **options: Any) -> None:
        self.shape = _shape_tuple(shape, self._spelling) if shape is not None else None
        self.strides = _shape_tuple(strides, self._spelling) if strides is not None else None
        if self.shape is not None and self.strides is not None and len(self.strides) != len(self.shape):
            raise LoomValueError(f"{self._spelling}: {len(self.strides)} strides for {len(self.shape)} dimensions")
        # A dtype string that is not a dtype names a T.dtype parameter (resolved at compile time).
        self.dtype = dtype if dtype is None or (isinstance(dtype, str) and not _is_dtype_text(dtype)) \
            else normalize_dtype(dtype, self._spelling)
        self.name = name
        unknown = sorted(set(options) - set(_BUFFER_OPTIONS))
        if unknown:
            raise LoomTypeError(f"{self._spelling}: unknown option(s) {unknown}")
        self.options = {k: v for k, v in options.items() if v not in (None, 0, "")}

    def _like(self, **changes: Any) -> BufferAnnot:
        fields = {"shape": self.shape, "strides": self.strides, "dtype": self.dtype, "name": self.name,
                  **self.options, **changes}
        return type(self)(**fields)

    def is_kernel_arg(self) -> bool:
        return self._scope == "global"

    @property
    def scope(self) -> str:
        return str(self.options.get("scope") or self._scope)

    def __call__(self, shape: Any, dtype: Any = "float32", data: Any = None, strides: Any = None,
                 elem_offset: Any = None, scope: Any = None, align: int = 0, offset_factor: int = 0,
                 buffer_type: str = "", axis_separators: Any = None) -> BufferAnnot:
        return type(self)(shape, strides, dtype, self.name, data=data, elem_offset=elem_offset, scope=scope,
                          align=align, offset_factor=offset_factor, buffer_type=buffer_type,
                          axis_separators=axis_separators)

    def __getitem__(self, params: Any) -> BufferAnnot:
        shape, dtype = _split_shape_dtype(params, self._spelling)
        return self._like(shape=shape, dtype=dtype)

    def with_name(self, name: str) -> BufferAnnot:
        return self._like(name=name)

    # -- keys --------------------------------------------------------------------------------------
    def get_key_parser(self) -> KeyParser:
        """Only what the annotation leaves open is in the key: the dtype and the (static) shape."""
        want_dtype, want_shape = self.dtype is None, self.shape is None
        if not (want_dtype or want_shape):
            return _no_key
        where = f"tensor parameter {self.name}"

        def parse(v: Any) -> Any:
            dtype, shape = array_facts(v, where)
            if want_dtype and want_shape:
                return (dtype, shape)
            return dtype if want_dtype else shape

        return parse

    def parse_key(self, target: Any) -> Any:
        return self.get_key_parser()(target)

    def describe_key(self, part: Any) -> str:
        open_dtype, open_shape = self.dtype is None, self.shape is None
        dtype = part[0] if open_dtype and open_shape else part if open_dtype else self.dtype
        shape = part[1] if open_dtype and open_shape else part if open_shape else self.shape
        policy = "compact (row-major)" if self.strides is None and not isinstance(self, StridedTensorAnnot) \
            else "strided"
        where = "" if self.scope == "global" else f", scope {self.scope}"
        return (f"{dtype} tensor of shape {_show_shape(shape)} ({'static' if open_shape else 'annotated'} dims), "
                f"{policy}{where}")

    # -- shapes ------------------------------------------------------------------------------------
    @staticmethod
    def match_shape(shape: Sequence[Any], target_shape: Sequence[int], vt: ArgVarTable) -> dict[str, int]:
        """Check a concrete ``target_shape`` against an annotated ``shape``; the sizes bound to names.

        Names already bound (in ``vt.static`` or by an earlier argument, in ``vt.bound``) must agree.
        """
        if len(shape) != len(target_shape):
            raise LoomValueError(f"expected {len(shape)} dimension(s) {_show_shape(shape)}, got {len(target_shape)} "
                                 f"{tuple(target_shape)}")
        bound = vt.bound
        out: dict[str, int] = {}
        for k, (want, got) in enumerate(zip(shape, target_shape)):
            name = want if isinstance(want, str) else want.name if isinstance(want, (DynAnnot, E.Var)) else None
            if isinstance(want, (int, np.integer)) and not isinstance(want, bool):
                if int(want) != got:
                    raise LoomValueError(f"dimension {k} must be {want}, got {got} (shape {tuple(target_shape)})")
                continue
            if name is None:
                continue
            known = vt.static.get(name, bound.get(name, out.get(name)))
            if isinstance(known, int) and known != got:
                raise LoomValueError(f"dimension {k} is {name}, which is {known} elsewhere in this call, but here "
                                     f"it is {got} (shape {tuple(target_shape)})")
            out[name] = got
        bound.update(out)
        return out

    def check_value(self, value: Any, where: str, vt: ArgVarTable) -> None:
        if not is_array(value):
            raise LoomTypeError(f"{where} is a tensor ({self._spelling}); got {type(value).__name__} (pass a numpy "
                                f"array, a loom.nd array or any array with __dlpack__)")
        dtype, shape = array_facts(value, where)
        if isinstance(self.dtype, DataType) and dtype != self.dtype:
            raise LoomTypeError(f"{where} is annotated {self.dtype}, got a {dtype} array")
        if self.shape is not None:
            try:
                self.match_shape(self.shape, shape, vt)
            except LoomValueError as err:
                raise LoomValueError(f"{where} ({_show_shape(self.shape)}): {err}") from None
        strides = noncompact_strides(value) if self.strides is None and not isinstance(self, StridedTensorAnnot) \
            else None
        if strides is not None:
            raise LoomValueError(f"{where} is a compact tensor (row-major, as {self._spelling} declares) but the "
                                 f"array has strides {strides} (elements); pass numpy.ascontiguousarray(...) or "
                                 f"annotate it T.StridedTensor[...]")

    # -- prim func ---------------------------------------------------------------------------------
    def create_prim_func_arg(self, name: str, value: Any, vt: ArgVarTable) -> IRBuffer:
        where = f"tensor parameter {name}"
        facts = array_facts(value, where) if value is not None and (self.shape is None or self.dtype is None) \
            else None
        if self.shape is not None:
            shape = [vt.resolve(s, f"{where}, dimension {k}") for k, s in enumerate(self.shape)]
        elif facts is not None:
            shape = list(facts[1])
        else:
            raise LoomValueError(f"{where} has no annotated shape; give an argument to take it from")
        dtype: Any = self.dtype
        if isinstance(dtype, str) and not isinstance(dtype, DataType):
            if dtype not in vt.static:
                raise LoomValueError(f"{where}: dtype {dtype!r} is neither a dtype nor a T.dtype parameter")
            dtype = normalize_dtype(vt.static[dtype], f"{where} (dtype parameter {dtype})")
        elif dtype is None:
            if facts is None:
                raise LoomValueError(f"{where} has no annotated dtype; give an argument to take it from")
            dtype = facts[0]
        strides = None
        if isinstance(self, StridedTensorAnnot):
            entries = self.strides if self.strides is not None else tuple(f"{name}_stride_{k}" for k in
                                                                           range(len(shape)))
            strides = [vt.resolve(s, f"{where}, stride {k}") for k, s in enumerate(entries)]
        elif self.strides is not None:
            strides = [vt.resolve(s, f"{where}, stride {k}") for k, s in enumerate(self.strides)]
        opts = self.options
        return decl_buffer(shape, dtype, self.name or name, data=opts.get("data"), strides=strides,
                           elem_offset=opts.get("elem_offset"), scope=self.scope if self.scope != "global" else "",
                           data_alignment=opts.get("align") or -1, offset_factor=opts.get("offset_factor", 0),
                           buffer_type=opts.get("buffer_type", ""))

    def promote(self) -> Optional[Annot]:
        if isinstance(self, TensorAnnot) and self.shape is not None and isinstance(self.dtype, DataType) and \
                all(isinstance(s, int) for s in self.shape) and self.name is not None:
            return TIRAnnot(self.create_prim_func_arg(self.name, None, ArgVarTable()))
        return None

    def __repr__(self) -> str:
        parts = [_show_shape(self.shape) if self.shape is not None else "..."]
        if self.strides is not None:
            parts.append(_show_shape(self.strides))
        if self.dtype is not None:
            parts.append(repr(str(self.dtype)))
        return f"{self._spelling}[{', '.join(parts)}]"


class TensorAnnot(BufferAnnot):
    """``T.Tensor[(M, N), "float32"]``: a compact (row-major) tensor argument."""

    _spelling = "T.Tensor"


class StridedTensorAnnot(BufferAnnot):
    """``T.StridedTensor[(M, N), (s0, s1), "float32"]``: strides in elements (names are runtime values)."""

    _spelling = "T.StridedTensor"

    def __call__(self, shape: Any, strides: Any = None, dtype: Any = "float32", data: Any = None,  # type: ignore[override]
                 elem_offset: Any = None, scope: Any = None, align: int = 0, offset_factor: int = 0,
                 buffer_type: str = "", axis_separators: Any = None) -> BufferAnnot:
        return BufferAnnot.__call__(self, shape, dtype, data, strides, elem_offset, scope, align, offset_factor,
                                    buffer_type, axis_separators)

    def __getitem__(self, params: Any) -> BufferAnnot:
        items = params if isinstance(params, tuple) else (params,)
        if len(items) not in (2, 3) or not isinstance(items[0], (tuple, list)) or \
                not isinstance(items[1], (tuple, list)):
            raise LoomTypeError(f"T.StridedTensor takes [(shape...), (strides...), dtype], got {params!r}")
        return self._like(shape=items[0], strides=items[1], dtype=items[2] if len(items) == 3 else None)


class FragmentBufferAnnot(BufferAnnot):
    """``T.FragmentBuffer``: a register fragment of a helper; never a kernel argument."""

    _scope, _spelling = "local.fragment", "T.FragmentBuffer"


class SharedBufferAnnot(BufferAnnot):
    """``T.SharedBuffer``: block-shared memory of a helper; never a kernel argument."""

    _scope, _spelling = "shared", "T.SharedBuffer"


class LocalBufferAnnot(BufferAnnot):
    """``T.LocalBuffer``: thread-local memory of a helper; never a kernel argument."""

    _scope, _spelling = "local", "T.LocalBuffer"


def _shape_tuple(value: Any, spelling: str) -> tuple:
    if isinstance(value, (list, tuple)):
        return tuple(value)
    if isinstance(value, (int, str, DynAnnot, E.PrimExpr)) and not isinstance(value, bool):
        return (value,)
    raise LoomTypeError(f"{spelling}: a shape is a tuple of sizes, got {value!r}")


def _split_shape_dtype(params: Any, spelling: str) -> tuple[Any, Any]:
    """``T.Tensor[...]``'s subscript as (shape, dtype): [(M, N), dtype], [(M, N)], [M, N, dtype] or [dtype]."""
    if not isinstance(params, tuple):
        if isinstance(params, (list,)):
            return tuple(params), None
        if _is_dtype_like(params):
            return None, params
        return (params,), None
    if len(params) == 2 and isinstance(params[0], (tuple, list)):
        return tuple(params[0]), params[1]
    if len(params) == 1 and isinstance(params[0], (tuple, list)):
        return tuple(params[0]), None
    if len(params) >= 2 and _is_dtype_like(params[-1]) and not isinstance(params[-1], (int, DynAnnot)):
        return tuple(params[:-1]), params[-1]
    return tuple(params), None


def _show_shape(shape: Any) -> str:
    if shape is None:
        return "(any)"
    items = [str(s.name) if isinstance(s, DynAnnot) else str(s) for s in shape]
    return "(" + ", ".join(items) + ("," if len(items) == 1 else "") + ")"


# ------------------------------------------------------------------------------------------ fixed buffers


class TIRAnnot(Annot):
    """A Buffer or Var given as the annotation itself: the kernel argument is exactly that object.

    A buffer made by ``T.Buffer(...)`` without a name takes its parameter's name,
    as in TVMScript (``rename`` rebuilds it under that name).

    >>> import loom, loom.language as T
    >>> T.Buffer((128,), T.float32).data.shape[0]
    128
    >>> T.Buffer((128,), T.float32).with_name("A").data.name
    'A'
    """

    def __init__(self, data: IRBuffer | E.Var, name: Optional[str] = None,
                 rename: Optional[Callable[[str], IRBuffer]] = None) -> None:
        if not isinstance(data, (IRBuffer, E.Var)):
            raise LoomTypeError(f"TIRAnnot holds a loom Buffer or Var, got {type(data).__name__}")
        self.data, self.name, self._rename = data, name, rename

    def is_kernel_arg(self) -> bool:
        return True

    def get_key_parser(self) -> KeyParser:
        return _no_key

    def create_prim_func_arg(self, name: str, value: Any, vt: ArgVarTable) -> IRBuffer | E.Var:
        return self.data

    def with_name(self, name: str) -> TIRAnnot:
        if self._rename is not None:  # an unnamed T.Buffer(...): one fresh buffer per parameter, named after it
            return TIRAnnot(self._rename(name), name)
        return TIRAnnot(self.data, name)

    @property
    def shape(self) -> tuple:
        return tuple(self.data.shape) if isinstance(self.data, IRBuffer) else ()

    @property
    def dtype(self) -> DataType:
        return self.data.dtype

    @property
    def strides(self) -> tuple:
        return tuple(self.data.strides) if isinstance(self.data, IRBuffer) else ()

    def scope(self) -> str:
        return (self.data.scope or "global") if isinstance(self.data, IRBuffer) else "global"

    def check_value(self, value: Any, where: str, vt: ArgVarTable) -> None:
        if isinstance(self.data, IRBuffer):
            strides = tuple(_fixed(s) for s in self.data.strides) or None
            TensorAnnot(tuple(_fixed(s) for s in self.data.shape), strides, self.data.dtype).check_value(value, where,
                                                                                                       vt)

    def describe_key(self, part: Any) -> str:
        if isinstance(self.data, IRBuffer):
            return f"{self.data.dtype} buffer {self.data.name} of shape {_show_shape(self.shape)} (fixed)"
        return f"runtime {self.data.dtype} scalar {self.data.name} (not in the key)"

    def __repr__(self) -> str:
        return f"TIRAnnot({self.data!r})"


def _fixed(s: Any) -> Any:
    return s.value if isinstance(s, E.IntImm) else s.name if isinstance(s, E.Var) else None


class Buffer:
    """``T.Buffer((128,), T.float32)``: a kernel argument with exactly this buffer (a :class:`TIRAnnot`).

    ``T.Buffer[(M, N), "float32"]`` is the subscript spelling of ``T.Tensor``.
    """

    def __new__(cls, shape: Any, dtype: Any = "float32", data: Any = None, strides: Any = None,  # type: ignore[misc]
                elem_offset: Any = None, scope: Any = None, align: int = 0, offset_factor: int = 0,
                buffer_type: str = "", axis_separators: Any = None, name: Optional[str] = None) -> TIRAnnot:
        shape, dtype = _shape_tuple(shape, "T.Buffer"), normalize_dtype(dtype, "T.Buffer")

        def make(buffer_name: str) -> IRBuffer:
            return decl_buffer(shape, dtype, buffer_name, data=data, strides=strides, elem_offset=elem_offset,
                               scope=scope or "", data_alignment=align or -1, offset_factor=offset_factor,
                               buffer_type=buffer_type)

        return TIRAnnot(make(name or "buffer"), rename=make if name is None and data is None else None)

    def __class_getitem__(cls, params: Any) -> BufferAnnot:
        return TensorAnnot()[params]
