"""Buffers: typed, shaped views of memory, as DLPack's DLTensor describes them.

A Buffer names a data pointer (a ``handle`` Var), an element dtype, a shape,
optional strides, an element offset, a storage scope, the pointer alignment it
promises and the factor its element offset is a multiple of.

A buffer with no strides is *compact* (row-major).  A function built for it
accepts only compact arrays.  Giving symbolic strides (``decl_buffer(...,
strides=[s0, s1])``) makes the function generic over layouts.

>>> import loom
>>> A = loom.decl_buffer((4, 8), "float32", name="A")
>>> A.name, str(A.dtype), [int(x) for x in A.shape], A.data_alignment
('A', 'float32', [4, 8], 64)
"""

from __future__ import annotations

from typing import Any, ClassVar, Sequence

import numpy as np

from ..errors import IRError, LoomTypeError, LoomValueError
from .dtype import DataType
from . import expr as E
from .expr_ops import convert_expr, const, floordiv
from .node import Node, TupleOf, child, children, register_object, value
from .op import Op, register_lowering, register_op

__all__ = ["Buffer", "decl_buffer", "address_of", "prefetch", "prefetch_parts", "prefetch_address", "element_ptr",
           "DEFAULT_DATA_ALIGNMENT", "UNKNOWN_EXTENT"]

#: What ``data_alignment=-1`` means: the alignment of Loom's own allocations.
DEFAULT_DATA_ALIGNMENT = 64
#: The extent of a view of memory whose size is unknown (``ir_builder.pointer``): the largest
#: int32, so every index is in bounds of the view; passes must not read it as a real size.
UNKNOWN_EXTENT = (1 << 31) - 1
#: The kinds of buffer: ``""`` (TVM's "default") and ``"auto_broadcast"``.
BUFFER_TYPES = frozenset({"", "auto_broadcast"})


@register_object("tir.Buffer")
class Buffer(Node):
    """A symbolic, shaped view of memory.  Build one with :func:`decl_buffer`."""

    binding_identity: ClassVar[bool] = True
    is_declaration: ClassVar[bool] = True
    data: E.Var = child(E.Var, binds=True)
    dtype: E.DTypeField = value(DataType, converter=DataType.of)
    shape: TupleOf[E.PrimExpr] = children(E.PrimExpr, binds=True)
    strides: TupleOf[E.PrimExpr] = children(E.PrimExpr, binds=True)
    elem_offset: E.PrimExpr = child(E.PrimExpr, binds=True)
    name: str = value(str, default="buffer")
    scope: str = value(str, default="")
    data_alignment: int = value(int, default=DEFAULT_DATA_ALIGNMENT)
    offset_factor: int = value(int, default=1)
    #: ``"auto_broadcast"``: a dimension of extent 1 is read at index 0 whatever the index
    #: (numpy-style broadcasting of arguments, as TVM's kAutoBroadcast); ``""`` otherwise.
    buffer_type: str = value(str, default="")

    #: :meth:`access_ptr` masks (TVM's values): the memory is read, written, or both (``READ | WRITE``).
    READ: ClassVar[int] = 1
    WRITE: ClassVar[int] = 2

    def __attrs_post_init__(self) -> None:
        if not self.data.dtype.is_handle:
            raise IRError(f"buffer {self.name}: data must be a handle Var, got {self.data.dtype}")
        if self.strides and len(self.strides) != len(self.shape):
            raise IRError(f"buffer {self.name}: {len(self.strides)} strides for {len(self.shape)} dimensions")
        if self.data_alignment <= 0 or self.data_alignment & (self.data_alignment - 1):
            raise IRError(f"buffer {self.name}: data_alignment must be a positive power of two, got {self.data_alignment}")
        if self.offset_factor < 1:
            raise IRError(f"buffer {self.name}: offset_factor must be >= 1, got {self.offset_factor}")
        if self.buffer_type not in BUFFER_TYPES:
            raise IRError(f"buffer {self.name}: buffer_type must be one of {sorted(BUFFER_TYPES)}, "
                          f"got {self.buffer_type!r}")

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def is_compact(self) -> bool:
        return not self.strides

    def effective_strides(self) -> tuple[E.PrimExpr, ...]:
        """The strides, computed row-major when the buffer is compact."""
        if self.strides:
            return self.strides
        out: list[E.PrimExpr] = []
        acc: E.PrimExpr = const(1, self.shape[-1].dtype if self.shape else "int32")
        for extent in reversed(self.shape):
            out.append(acc)
            acc = acc * extent
        return tuple(reversed(out))

    def _indices(self, begin: Any, what: str) -> list[E.PrimExpr]:
        """``begin`` as a list of index expressions, one per dimension.

        A single index (not a list) is accepted for a 1-D buffer, as TVM's classic API did.
        """
        if isinstance(begin, (str, bytes)) or not isinstance(begin, Sequence):
            if self.ndim > 1:
                raise IRError(f"{what}: buffer {self.name} has {self.ndim} dimensions, indexed with 1 ({begin!s}); "
                              f"pass a list of {self.ndim} indices")
            begin = [begin]
        elif self.ndim and len(begin) != self.ndim:
            raise IRError(f"{what}: buffer {self.name} has {self.ndim} dimensions, indexed with {len(begin)} "
                          f"({', '.join(str(b) for b in begin) or 'no index'})")
        out = []
        for k, b in enumerate(begin):
            try:
                out.append(convert_expr(b))
            except LoomTypeError as err:
                raise LoomTypeError(f"{what}: index {k} of buffer {self.name}: {err}") from None
        return out

    def offset_of(self, indices: Sequence[Any]) -> E.PrimExpr:
        """The flat element offset of ``indices`` (elem_offset included).

        >>> import loom
        >>> B = loom.decl_buffer((4, 8), name="B")
        >>> B.offset_of([1, 2])
        10
        >>> B.offset_of(1)
        Traceback (most recent call last):
          ...
        loom.errors.IRError: offset_of: buffer B has 2 dimensions, indexed with 1 (1); pass a list of 2 indices
        """
        indices = self._indices(indices, "offset_of")
        if len(indices) != len(self.shape):
            raise IRError(f"buffer {self.name} has {len(self.shape)} dimensions, indexed with {len(indices)}")
        out: E.PrimExpr = self.elem_offset
        for idx, stride in zip(indices, self.effective_strides()):
            out = out + convert_expr(idx) * stride
        return out

    def __getitem__(self, indices: Any) -> E.BufferLoad:
        """``A[i, j]`` reads the buffer."""
        if not isinstance(indices, tuple):
            indices = (indices,)
        return E.BufferLoad(self, [convert_expr(i) for i in indices])

    def _ramp(self, idx: list[E.PrimExpr], t: DataType, what: str) -> list[E.PrimExpr]:
        """``idx`` with its last index widened to the lanes ``t`` holds beyond the element's own."""
        if t.element_of() != self.dtype.element_of() or t.lanes % self.dtype.lanes:
            action = f"load {t} from" if what == "vload" else f"store a {t} value into"
            raise LoomTypeError(f"{what}: cannot {action} buffer {self.name} of {self.dtype} (the element types "
                                "differ, or the lanes are not a multiple of the buffer's)")
        lanes = t.lanes // self.dtype.lanes
        if lanes > 1:
            if not idx:
                raise IRError(f"{what}: a {t} access of the 0-d buffer {self.name} needs an index")
            idx[-1] = E.Ramp(idx[-1], const(1, idx[-1].dtype), lanes)
        return idx

    def vload(self, begin: Sequence[Any] | Any, dtype: Any = None) -> E.BufferLoad:
        """Load ``lanes`` consecutive elements along the last axis starting at ``begin``.

        ``begin`` has one index per dimension; a 1-D buffer also takes a single index.

        >>> import loom
        >>> A = loom.decl_buffer((8,), "float32", name="A")
        >>> A.vload(loom.var("i") * 2, "float32x2")
        A[ramp(i * 2, 1, 2)]
        """
        t = DataType.of(dtype) if dtype is not None else self.dtype
        return E.BufferLoad(self, self._ramp(self._indices(begin, "vload"), t, "vload"))

    def vstore(self, begin: Sequence[Any] | Any, value_: Any) -> Any:
        """Store a (vector) value at ``begin`` along the last axis (a 1-D buffer takes a single index).

        A Python number is stored as a constant of the buffer's dtype.
        """
        from .stmt import BufferStore

        v = convert_expr(value_, None if isinstance(value_, E.PrimExpr) else self.dtype)
        return BufferStore(self, v, self._ramp(self._indices(begin, "vstore"), v.dtype, "vstore"))

    def access_ptr(self, access_mask: str | int, ptr_type: Any = "handle", content_lanes: int = 1,
                   offset: Any = 0) -> E.Call:
        """A pointer to this buffer's first element (``offset`` elements further), to pass to a call.

        ``access_mask`` says what the callee does with the memory: ``"r"``, ``"w"``,
        ``"rw"`` or an int of :attr:`READ` / :attr:`WRITE` bits.  With ``content_lanes``
        ``k > 1`` the pointer addresses vectors of ``k`` elements.  The result is a
        ``tir.tvm_access_ptr(type_annotation(dtype), data, elem_offset, extent, mask)``
        call: codegen makes it ``data + elem_offset`` (elements of ``dtype``); ``extent``
        is how many elements from there the buffer holds.

        >>> import loom
        >>> B = loom.decl_buffer((4, 8), "float32", name="B", offset_factor=1)
        >>> p = B.access_ptr("r", offset=2)
        >>> str(p.dtype), str(p.args[2]), str(p.args[3]), p.args[4].value
        ('handle', 'B_elem_offset + 2', '30', 1)
        """
        mask = _access_mask(access_mask, self.name)
        t = DataType.of(ptr_type)
        if not t.is_handle:
            raise LoomTypeError(f"access_ptr of buffer {self.name}: ptr_type must be a handle type, got {t}")
        if isinstance(content_lanes, bool) or not isinstance(content_lanes, int) or content_lanes < 1:
            raise LoomValueError(f"access_ptr of buffer {self.name}: content_lanes must be a positive int, "
                                 f"got {content_lanes!r}")
        idx_t = self.elem_offset.dtype
        off = convert_expr(offset, str(idx_t))
        if not off.dtype.is_integer or off.dtype.lanes != 1:
            raise LoomTypeError(f"access_ptr of buffer {self.name}: offset must be a scalar integer, got {off.dtype}")
        if not self.shape:
            extent: E.PrimExpr = const(1, idx_t)
        elif self.strides:
            extent = self.strides[0] * self.shape[0] - off
        else:
            extent = self.shape[0]
            for n in self.shape[1:]:
                extent = extent * n
            extent = extent - off
        start = self.elem_offset + off
        content = self.dtype
        if content_lanes > 1:  # counted in vectors of content_lanes elements
            content = self.dtype.with_lanes(content_lanes)
            start, extent = floordiv(start, content_lanes), floordiv(extent, content_lanes)
        annotation = E.Call(content, Op.get("tir.type_annotation"), [])
        return E.Call(t, Op.get("tir.tvm_access_ptr"), [annotation, self.data, start, extent, const(mask, "int32")])


def _access_mask(mask: str | int, name: str) -> int:
    if isinstance(mask, str):
        bits = 0
        for ch in mask:
            if ch not in "rw":
                raise LoomValueError(f"access_ptr of buffer {name}: unknown access mask {mask!r}; use 'r', 'w' or 'rw'")
            bits |= Buffer.READ if ch == "r" else Buffer.WRITE
        if bits:
            return bits
    elif isinstance(mask, int) and not isinstance(mask, bool) and 0 < mask <= (Buffer.READ | Buffer.WRITE):
        return mask
    raise LoomValueError(f"access_ptr of buffer {name}: the access mask must be 'r', 'w', 'rw' or "
                         f"Buffer.READ | Buffer.WRITE, got {mask!r}")


def _access_ptr_impl(annotation: Any, data: np.ndarray, offset: Any, extent: Any, mask: Any) -> np.ndarray:
    """The interpreter's pointer: the flat memory from the element ``offset`` on (a view, so writes land)."""
    return data.reshape(-1)[int(offset):]


def address_of(load: E.BufferLoad) -> E.Call:
    """The address of the element ``load`` reads, a ``handle`` to pass to a call (TVM's ``address_of``).

    The callee may read and write the memory from there on.  Lowering turns it into
    ``load.buffer.access_ptr("rw", offset=...)``; a vector load gives the address of
    its first lane.  TVM v0.6 spelled it ``call_pure_intrin("handle", "tvm_address_of", A[i])``.

    >>> import loom
    >>> A = loom.decl_buffer((4, 8), "float32", name="A")
    >>> p = loom.address_of(A[1, 2]); str(p)
    "address_of(A[1, 2], dtype='handle')"
    >>> str(loom.ir.op.lowering_rule("tir.address_of", "llvm")(p).args[2])
    '10'
    """
    return E.Call(DataType.of("handle"), Op.get("tir.address_of"), [_element(load)])


def _element(load: Any) -> E.BufferLoad:
    if not isinstance(load, E.BufferLoad):
        raise LoomTypeError(f"address_of takes a buffer element (A[i, j]), got {type(load).__name__} {load}")
    return load


def element_ptr(load: E.BufferLoad, access_mask: str = "rw") -> E.Call:
    """``load.buffer.access_ptr(access_mask)`` at the element ``load`` reads (a vector load: its first lane)."""
    buf = load.buffer
    offset: Any = 0  # from elem_offset, which access_ptr adds
    for idx, stride in zip(load.indices, buf.effective_strides()):
        offset = offset + (idx.base if isinstance(idx, E.Ramp) else idx) * stride
    return buf.access_ptr(access_mask, offset=offset)


def _lower_address_of(call: E.Call) -> E.Call:
    return element_ptr(_element(call.args[0]))  # call_intrin("handle", "address_of", x) is checked only here


def prefetch(load: E.BufferLoad, rw: int = 0, locality: int = 3) -> E.Call:
    """A hint to bring the cache line holding the element ``load`` reads into the caches.

    ``rw`` is 0 to read it, 1 to write it; ``locality`` runs from 0 (used once) to 3
    (keep it in every cache level), as for C's ``__builtin_prefetch``.  The llvm and
    c targets emit ``llvm.prefetch`` / ``__builtin_prefetch`` (neither can fault);
    the interpreter checks the element is in bounds; other targets drop the call.
    ``Stage.prefetch`` places such calls from a schedule.

    >>> import loom
    >>> A = loom.decl_buffer((64,), "float32", name="A")
    >>> print(loom.ir.Evaluate(loom.prefetch(A[16])))
    prefetch(A[16], 0, 3)
    """
    for name, v, top in (("rw", rw, 1), ("locality", locality, 3)):
        if isinstance(v, bool) or not isinstance(v, int) or not 0 <= v <= top:
            raise LoomValueError(f"prefetch: {name} must be an int from 0 to {top}, got {v!r}")
    return E.Call(DataType.of("int32"), Op.get("tir.prefetch"), [_element(load), const(rw), const(locality)])


register_op("tir.address_of", 1, None, doc="address_of(A[i]): a handle to the element A[i] (lowered to tvm_access_ptr)")
register_lowering("tir.address_of", "default", _lower_address_of)
def prefetch_parts(call: E.Call) -> tuple[E.PrimExpr, E.PrimExpr, E.PrimExpr]:
    """``(where, rw, locality)`` of a ``tir.prefetch`` call; ``where`` is the element (a BufferLoad) in
    Loom's form ``prefetch(A[i], rw, locality)``, or an address (a handle) in TVM's
    ``prefetch(address_of(A[i]), rw, locality, cache_type)`` (the data cache is the only kind)."""
    if len(call.args) not in (3, 4):
        raise IRError(f"prefetch takes (A[i], rw, locality), got {len(call.args)} arguments: {call}")
    where = call.args[0]
    if isinstance(where, E.Call) and isinstance(where.op, Op) and where.op.name == "tir.address_of":
        where = where.args[0]
    if not isinstance(where, E.BufferLoad) and not where.dtype.is_handle:
        raise IRError(f"prefetch needs a buffer element (A[i]) or an address as its first argument, got {where}")
    return where, call.args[1], call.args[2]


def prefetch_address(where: E.PrimExpr) -> E.PrimExpr:
    """The address a prefetch hints (``where`` from :func:`prefetch_parts`)."""
    return element_ptr(where, "r") if isinstance(where, E.BufferLoad) else where


register_op("tir.prefetch", -1, None, pure=False,
            doc="prefetch(A[i], rw, locality): a cache hint for the line holding A[i] (no value, never faults)")
# A hint: a target that cannot give it loses nothing.  llvm, c and the interpreter keep the call.
register_lowering("tir.prefetch", "default", lambda call: const(0, "int32"))
register_lowering("tir.prefetch", "interp", lambda call: None)
register_op("tir.type_annotation", 0, lambda: 0,
            doc="a value standing for its own dtype (what tvm_access_ptr points to)")
register_op("tir.tvm_access_ptr", 5, _access_ptr_impl,
            doc="tvm_access_ptr(type_annotation(dtype), data, offset, extent, mask): data + offset elements of dtype")


def _index_dtype(shape: Sequence[E.PrimExpr]) -> str:
    return "int64" if any(s.dtype.bits == 64 for s in shape) else "int32"


def decl_buffer(shape: Sequence[Any] | Any, dtype: Any = None, name: str = "buffer", data: E.Var | None = None,
                strides: Sequence[Any] | None = None, elem_offset: Any = None, scope: str = "",
                data_alignment: int = -1, offset_factor: int = 0, buffer_type: str = "") -> Buffer:
    """Declare a symbolic buffer (see seed 000 and the module docstring).

    ``offset_factor`` non-zero with no ``elem_offset`` creates an elem_offset Var
    that generated code honours and checks to be a multiple of the factor.
    ``buffer_type="auto_broadcast"`` makes a dimension of extent 1 broadcast: it
    is read at index 0 whatever index the program uses (bind it to a placeholder
    with ``binds=`` to add arrays of shapes ``(2, 4, 3)`` and ``(2, 1, 1)``).

    >>> import loom
    >>> B = loom.decl_buffer((16,), "float32", name="B", offset_factor=4)
    >>> B.elem_offset.name, B.offset_factor
    ('B_elem_offset', 4)
    """
    if not isinstance(shape, (list, tuple)):
        shape = (shape,)
    shape_e = tuple(convert_expr(s) for s in shape)
    for s in shape_e:
        if not s.dtype.is_integer or s.dtype.lanes != 1:
            raise LoomValueError(f"buffer {name}: shape entries must be scalar integers, got {s.dtype}")
    t = DataType.of(dtype if dtype is not None else "float32")
    idx_t = _index_dtype(shape_e)
    # Python ints follow the index dtype, so (n_int64, 4) has one dtype throughout.
    shape_e = tuple(e if isinstance(s, E.PrimExpr) else convert_expr(s, idx_t) for s, e in zip(shape, shape_e))
    if data is None:
        data = E.Var(name, "handle")
    strides_e = tuple(convert_expr(s, idx_t) for s in strides) if strides is not None else ()
    if offset_factor < 0:
        raise LoomValueError(f"buffer {name}: offset_factor must be >= 0, got {offset_factor}")
    if elem_offset is None:
        elem_offset_e = E.Var(f"{name}_elem_offset", idx_t) if offset_factor != 0 else const(0, idx_t)
    else:
        elem_offset_e = convert_expr(elem_offset, idx_t)
    if data_alignment == -1:
        data_alignment = DEFAULT_DATA_ALIGNMENT
    if buffer_type == "default":  # TVM's spelling of the plain kind
        buffer_type = ""
    if buffer_type not in BUFFER_TYPES:
        raise LoomValueError(f"buffer {name}: buffer_type must be 'default' or 'auto_broadcast', got {buffer_type!r}")
    return Buffer(data, t, shape_e, strides_e, elem_offset_e, name, scope, data_alignment, max(offset_factor, 1),
                  buffer_type)
