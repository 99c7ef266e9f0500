"""The call-time argument checker every runtime Module shares (interp, llvm, c, cuda).

A built function's signature is its PrimFunc after MakeAPI: ``params`` in order,
and ``buffer_map`` giving the :class:`~loom.ir.Buffer` behind each buffer
parameter.  :class:`ArgumentChecker` precomputes one check per parameter when a
Module is built; each call then runs only those closures.

What a call may pass:

* a **buffer parameter** on the CPU: a numpy array, a ``loom.nd.NDArray``, any
  object with ``__dlpack__``/``__dlpack_device__`` on the CPU, or with
  ``__array_interface__``.  Checked: dtype, ndim, shape (constants equal;
  symbolic dimensions bound, and equal wherever the same Var appears), strides
  (a compact buffer needs a C-contiguous array; symbolic strides are bound from
  the array, in elements), ``elem_offset`` (see below; a multiple of
  ``offset_factor``), device, alignment (see below).
* a **buffer parameter on a device** (``abi.arg_devices`` gives each
  parameter's DLPack device type): a ``loom.nd.NDArray`` on a device of that
  type, or a DLPack object there (wrapped by ``loom.nd.from_dlpack``).  The same
  checks, read from the array's descriptor; its data pointer must already be
  aligned (device memory cannot be copied to an aligned place), and host arrays
  are refused: they must be copied to the device explicitly.
* a **handle parameter without a buffer**: a C-contiguous array on the parameter's device.
* a **scalar parameter**: a Python or numpy scalar of a fitting kind (no float
  for an int, no int out of range).

Written parameters: the function's ``loom.written_params`` attribute (recorded
by MakeAPI, kept in every signature; see
:func:`loom.transform.make_api.declared_writes`) names the handle parameters
whose memory it may write.  Each of their arrays must be writable (a read-only
numpy array, ``numpy.frombuffer`` of bytes, a read-only memmap or a DLPack
tensor flagged read-only is refused), and must not reach one element from two
indices (a stride of 0, say).

Overlap: the compiled code assumes that arguments do not overlap where one of
them is written, so a call in which the memory of a written argument (from its
lowest to its highest byte) overlaps that of any other argument on the same
device is refused, naming both: every backend then gives the same answer.
Arguments that are only read may share memory (the same array passed twice).

``elem_offset``: when a buffer's ``elem_offset`` is not the constant 0 and the
array is a view into a C-contiguous base array, the data pointer is the base's
and ``elem_offset`` is the view's element offset into it (as TVM's
``DLTensor.byte_offset``); otherwise the data pointer is the array's own.  For
a device array, the base is its ``handle`` and the offset its ``byte_offset``.

Alignment policy: generated code may assume that a buffer's data pointer is a
multiple of its ``data_alignment`` (64 bytes by default), but numpy arrays are
often only 16-byte aligned.  Rejecting them would reject most user input, and
running on them would break that assumption, so a misaligned argument is
**copied in** to aligned memory with the identical layout (strides and element
offset, so the binding is unchanged) and the elements the call wrote are
**copied back** when it returns, whether it succeeds or raises.  ``loom.nd``
arrays are allocated 64-byte aligned and never copied; a read-only misaligned
array that the call writes to is an error.

Every mistake raises an :class:`ArgumentTypeError` or :class:`ArgumentValueError`
(``LoomError`` and ``TypeError``/``ValueError``) naming the function, the argument
(position, parameter and buffer) and what was expected, before any memory is touched.

>>> import numpy as np, loom
>>> from loom.ir import PrimFunc, Evaluate
>>> n = loom.var("n")
>>> A = loom.decl_buffer((n, 4), "float32", name="A")
>>> f = PrimFunc([A.data], Evaluate(0), buffer_map={A.data: A}).with_attr("global_symbol", "f")
>>> call = ArgumentChecker(f).bind((np.zeros((3, 4), "float32"),))
>>> call.binding[n]
3
>>> ArgumentChecker(f).bind((np.zeros((3, 5), "float32"),))
Traceback (most recent call last):
  ...
loom.runtime.arguments.ArgumentValueError: f: argument 0 (A: float32 buffer A of shape (n, 4)): shape[1] must be 4, got shape (3, 5)
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np

from ..errors import LoomValueError
from ..ir import expr as E
from ..ir.function import PrimFunc
from ..ir.functor import collect
from ._values import (HOST_MEMORY, ArgumentError, ArgumentTypeError, ArgumentValueError, aligned_clone,
                      check_strides, data_of, describe, device_array, elems, first_overlap,
                      host_array, int_evaluator, int_range, kind_of, reaches_twice, read_only_error, scalar_converter,
                      self_overlap_error, span)
from .bound_call import BoundCall
from .host_memory import span as layout_span
from .ndarray import ALLOC_ALIGNMENT, NDArray

__all__ = ["ArgumentChecker", "BoundCall", "ArgumentError", "ArgumentTypeError", "ArgumentValueError"]

_CPU = 1


# ---------------------------------------------------------------------------
# the checker


_Step = Callable[[Any, BoundCall, list], None]


class ArgumentChecker:
    """Checks and binds call arguments against one PrimFunc's signature.

    :param func: the PrimFunc after MakeAPI (any PrimFunc with params and buffer_map).
    :param name: the name errors use (default: its ``global_symbol``).
    :param device_type: the DLPack device type of every handle parameter's
        memory; None (the default) reads each parameter's from ``func``
        (:func:`loom.runtime.abi.arg_devices`: the CPU unless the function says otherwise).
    :param assumed_alignment: the largest pointer alignment the backend's code
        relies on; a buffer then needs ``min(data_alignment, assumed_alignment)``.
        None (the default, and the interp's choice) honours ``data_alignment``.
    """

    def __init__(self, func: PrimFunc, name: str | None = None, device_type: int | None = None,
                 assumed_alignment: int | None = None) -> None:
        from ..transform.make_api import declared_writes  # the passes import the runtime
        from .abi import arg_devices  # abi imports this module

        #: Per parameter, the DLPack device type of the memory it points to (meaningless for scalars).
        self.device_types = arg_devices(func) if device_type is None else (int(device_type),) * len(func.params)
        self.name = name or str(func.attrs.get("global_symbol", "main"))
        self.assumed_alignment = assumed_alignment
        self.params = tuple(func.params)
        #: The indices of the handle parameters whose memory the function may write.
        self.written: tuple[int, ...] = declared_writes(func)
        # Overlap needs something written and two arguments with memory.
        handles = sum(1 for p in func.params if p.dtype.is_handle)
        self._overlap_possible = bool(self.written) and handles > 1
        self.vars: dict[int, E.Var] = {}
        self._steps: list[_Step] = []
        # Per parameter: None for a scalar, else whether its memory is addressed from the base array.
        self._from_base: list[bool | None] = []
        bindable = {id(p) for p in func.params if not p.dtype.is_handle}
        for declared in func.buffer_map.values():
            bindable.update(id(e) for e in (*declared.shape, *declared.strides, declared.elem_offset)
                            if isinstance(e, E.Var))
        for k, p in enumerate(func.params):
            buf = func.buffer_map.get(p)
            if buf is not None:
                self._steps.append(self._buffer_step(k, p, buf, bindable))
                self._from_base.append(not (isinstance(buf.elem_offset, E.IntImm) and buf.elem_offset.value == 0))
            elif p.dtype.is_handle:
                self._steps.append(self._pointer_step(k, p))
                self._from_base.append(False)
            else:
                self._steps.append(self._scalar_step(k, p))
                self._from_base.append(None)
        #: Per parameter, the alignment its data pointer needs (None for scalars); None
        #: altogether when a buffer binds an ``elem_offset`` (see loom.runtime.fast_path).
        self.pointer_alignments: tuple[int | None, ...] | None = None
        if not any(self._from_base):
            self.pointer_alignments = tuple(
                None if fb is None else self._alignment(func.buffer_map[p]) if p in func.buffer_map else 1
                for p, fb in zip(func.params, self._from_base))

    def __repr__(self) -> str:
        return f"<ArgumentChecker {self.name}({', '.join(p.name for p in self.params)})>"

    # -- entry point -------------------------------------------------------------
    def bind(self, args: Sequence[Any]) -> BoundCall:
        """Check ``args`` and return their :class:`BoundCall`; raises before touching any memory."""
        steps = self._steps
        if len(args) != len(steps):
            names = ", ".join(p.name for p in self.params)
            raise ArgumentTypeError(f"{self.name} takes {len(steps)} arguments ({names}), got {len(args)}")
        call = BoundCall(len(steps), self.vars, self._from_base, self.device_types)
        pending: list[tuple[Any, ...]] = []
        for k, step in enumerate(steps):
            step(args[k], call, pending)
        if pending:
            env = {k: v for k, (v, _) in call._seen.items()}
            for fn, expr, actual, origin, got in pending:
                try:
                    want = fn(env)
                except ZeroDivisionError:
                    raise ArgumentValueError(f"{origin}: {expr} divides by zero with these arguments") from None
                if want != actual:
                    raise ArgumentValueError(f"{origin} must be {expr} = {want}, got {got}")
        if self._overlap_possible:
            pair = first_overlap(call._ranges, self.written)
            if pair is not None:
                self._overlap_error(*pair)
        return call

    __call__ = bind

    def _overlap_error(self, i: int, j: int) -> None:
        i, j = sorted((i, j))
        label = {k: f"argument {k} ({self.params[k].name})" for k in (i, j)}
        both = i in self.written and j in self.written
        writes = "both" if both else label[i if i in self.written else j]
        raise ArgumentValueError(f"{self.name}: {label[i]} and {label[j]} overlap in memory, and {self.name} writes "
                                 f"{writes}; the result would depend on the order of its loads and stores, so it "
                                 "is refused: pass arrays that do not overlap (a copy of one of them)")

    # -- scalars -------------------------------------------------------------------
    def _scalar_step(self, k: int, p: E.Var) -> _Step:
        what = f"{self.name}: argument {k} ({p.name}: {p.dtype})"
        convert, key = scalar_converter(p.dtype), id(p)
        self.vars[key] = p
        check = self._setter(p)

        def step(arg: Any, call: BoundCall, pending: list) -> None:
            try:
                value = convert(arg)
            except TypeError as err:
                raise ArgumentTypeError(f"{what} expects a {p.dtype} scalar, got {kind_of(arg)} ({err})") from None
            except (ValueError, OverflowError) as err:
                raise ArgumentValueError(f"{what} expects a {p.dtype} scalar, got {arg!r} ({err})") from None
            call.values[k] = value
            check(value, call, what)

        return step

    def _pointer_step(self, k: int, p: E.Var) -> _Step:
        what = f"{self.name}: argument {k} ({p.name}: handle)"
        dev_type = self.device_types[k]
        written = k in self.written

        def step(arg: Any, call: BoundCall, pending: list) -> None:
            if dev_type != _CPU:
                a = device_array(arg, what, dev_type)
                if a._strides is not None:
                    raise ArgumentValueError(f"{what} is a pointer; it takes a compact array, got strides "
                                             f"{a._strides} (elements)")
                if written and a._readonly:
                    read_only_error(what, self.name)
                call.values[k], call.pointers[k] = a, a._ptr
                if a.size:
                    call._ranges[k] = ((a._device.device_type, a._device.device_id), a._ptr, a._ptr + a.nbytes)
                return
            arr = host_array(arg, what)
            if not arr.flags.c_contiguous:
                raise ArgumentValueError(f"{what} is a pointer; it takes a C-contiguous array, got strides "
                                         f"{arr.strides} (bytes)")
            if written and not arr.flags.writeable:
                read_only_error(what, self.name)
            call.values[k] = arr
            ptr = call.pointers[k] = arr.ctypes.data
            if arr.size:
                call._ranges[k] = (HOST_MEMORY, ptr, ptr + arr.nbytes)

        return step

    # -- buffers -------------------------------------------------------------------
    def _buffer_step(self, k: int, p: E.Var, buf: Any, bindable: set[int]) -> _Step:
        dims = [str(s) for s in buf.shape]
        shape_text = f"({dims[0]},)" if len(dims) == 1 else f"({', '.join(dims)})"
        what = f"{self.name}: argument {k} ({p.name}: {buf.dtype} buffer {buf.name} of shape {shape_text})"
        npd, ndim, dtype_name = buf.dtype.numpy(), len(buf.shape), str(buf.dtype)
        vector = None
        if buf.dtype.lanes != 1:
            vector, npd = _vector_elements(buf.dtype, what)
        align = self._alignment(buf)
        shape = [self._entry(e, bindable, buf) for e in buf.shape]
        strides = [self._entry(e, bindable, buf) for e in buf.strides]
        offset = self._entry(buf.elem_offset, bindable, buf)
        from_base = not (offset[0] == "const" and offset[1] == 0)
        factor = buf.offset_factor
        match = self._match
        const_shape = tuple(e[1] for e in shape) if all(e[0] == "const" for e in shape) else None
        shape_at = [f"{what}: shape[{d}]" for d in range(ndim)]
        stride_at = [f"{what}: strides[{d}]" for d in range(ndim)]
        offset_at = f"{what}: elem_offset"
        dev_type = self.device_types[k]
        written = k in self.written
        fname = self.name

        def check_shape(got: tuple[int, ...], call: BoundCall, pending: list, arr: Any) -> None:
            if len(got) != ndim:
                raise ArgumentValueError(f"{what} needs {ndim} dimensions, got an array of shape {got}")
            if const_shape is None:
                for d in range(ndim):
                    match(shape[d], got[d], call, pending, shape_at[d], arr, "shape")
            elif got != const_shape:
                d = next(d for d in range(ndim) if got[d] != const_shape[d])
                match(shape[d], got[d], call, pending, shape_at[d], arr, "shape")

        def match_strides(got: tuple[int, ...], got_strides: tuple[int, ...], call: BoundCall, pending: list,
                          arr: Any) -> None:
            for d in range(ndim):
                entry = strides[d]
                if got[d] > 1:
                    match(entry, got_strides[d], call, pending, stride_at[d], arr, "strides")
                elif entry[0] == "var" and id(entry[1]) not in call._seen:
                    # An extent-1 axis never multiplies its stride by a non-zero index,
                    # so an arbitrary value there binds but never conflicts.
                    entry[2](got_strides[d], call, stride_at[d])

        def check_offset(off: int, call: BoundCall, pending: list, arr: Any) -> None:
            match(offset, off, call, pending, offset_at, arr, "offset")
            if off % factor:
                raise ArgumentValueError(f"{what}: elem_offset {off} is not a multiple of offset_factor "
                                         f"{factor}; pass a view that starts at a multiple of it, or a copy")

        def step(arg: Any, call: BoundCall, pending: list) -> None:
            if type(arg) is NDArray and arg._device.device_type == _CPU:
                arr, ptr = arg._data, arg._ptr
                assert arr is not None  # a CPU NDArray always keeps its numpy view
                if arg._dtype != dtype_name:  # said before its view shows a vector's lanes as an axis
                    raise ArgumentTypeError(f"{what} needs dtype {buf.dtype}, got an array of {arg._dtype}")
            else:
                arr, ptr = host_array(arg, what), 0
            if vector is not None:
                arr = vector(arr)
            if arr.dtype != npd:
                raise ArgumentTypeError(f"{what} needs dtype {buf.dtype}, got an array of {arr.dtype}")
            check_shape(arr.shape, call, pending, arr)
            if not strides:
                if not arr.flags.c_contiguous:
                    check_strides(arr, what)
                    raise ArgumentValueError(f"{what} is compact (declared without strides) but the array has "
                                             f"strides {elems(arr)} (elements); pass numpy.ascontiguousarray(...)")
            else:
                check_strides(arr, what)
                match_strides(arr.shape, elems(arr), call, pending, arr)
                if written and not arr.flags.c_contiguous and reaches_twice(arr.shape, elems(arr)):
                    self_overlap_error(what, fname, elems(arr))
            if written and not arr.flags.writeable:
                read_only_error(what, fname)
            if from_base:
                ptr, off = data_of(arr, what)
                check_offset(off, call, pending, arr)
            else:
                off = 0
                if not ptr:
                    ptr = arr.ctypes.data
            nbytes = (span(arr) * arr.itemsize if arr.size else 0) if strides else arr.nbytes
            if nbytes:
                lo = ptr + off * arr.itemsize if off else ptr
                call._ranges[k] = (HOST_MEMORY, lo, lo + nbytes)
                if ptr % align:
                    arr, ptr = _aligned_clone(arr, off, align, call, what)
            call.values[k] = arr
            call.pointers[k] = ptr

        def device_step(arg: Any, call: BoundCall, pending: list) -> None:
            a = device_array(arg, what, dev_type)
            if a._dtype != dtype_name:
                raise ArgumentTypeError(f"{what} needs dtype {buf.dtype}, got an array of {a._dtype}")
            got, el = a._shape, a._strides
            check_shape(got, call, pending, a)
            if el is not None and any(s < 0 for s in el):
                raise ArgumentValueError(f"{what}: array strides {el} (elements) must be non-negative; pass a copy")
            if not strides:
                if el is not None:
                    raise ArgumentValueError(f"{what} is compact (declared without strides) but the array has "
                                             f"strides {el} (elements); pass a compact copy (x.copyto(x.device))")
            else:
                match_strides(got, a.strides, call, pending, a)
                if written and el is not None and reaches_twice(got, el):
                    self_overlap_error(what, fname, el)
            if written and a._readonly:
                read_only_error(what, fname)
            if from_base:
                item = a._npdtype.itemsize
                if a._byte_offset % item:
                    raise ArgumentValueError(f"{what}: byte_offset {a._byte_offset} is not a whole number of "
                                             f"{item}-byte elements")
                ptr = a._handle
                check_offset(a._byte_offset // item, call, pending, a)
            else:
                ptr = a._ptr
            if ptr % align and 0 not in got:
                raise ArgumentValueError(
                    f"{what}: its data pointer {ptr:#x} on {a._device} is not a multiple of {align} bytes, and "
                    f"device memory is not copied to an aligned place; pass an array allocated by loom.nd "
                    f"({ALLOC_ALIGNMENT}-byte aligned) or a view that starts at an aligned element")
            call.values[k] = a
            call.pointers[k] = ptr
            if 0 not in got:
                first, end = layout_span(got, a.strides)  # element offsets from the data pointer
                item = a._npdtype.itemsize
                call._ranges[k] = ((a._device.device_type, a._device.device_id), a._ptr + first * item,
                                   a._ptr + end * item)

        return step if dev_type == _CPU else device_step

    def _alignment(self, buf: Any) -> int:
        if self.assumed_alignment is None:
            return max(1, buf.data_alignment)
        return max(1, min(buf.data_alignment, self.assumed_alignment))

    def _entry(self, e: E.PrimExpr, bindable: set[int], buf: Any) -> tuple[Any, ...]:
        if isinstance(e, E.IntImm):
            return ("const", e.value)
        if isinstance(e, E.Var):
            self.vars[id(e)] = e
            return ("var", e, self._setter(e))
        for v in collect(e, lambda x: isinstance(x, E.Var)):
            if id(v) not in bindable:
                raise LoomValueError(f"{self.name}: {e} in the layout of buffer {buf.name} uses {v.name}, which "
                                     "no argument determines (not a parameter, nor a plain shape/stride/offset Var)")
        return ("expr", int_evaluator(e, self.name), e)

    def _setter(self, var: E.Var) -> Callable[[int, BoundCall, str], None]:
        key, name = id(var), var.name
        is_size = isinstance(var, E.SizeVar)
        lo, hi = int_range(var.dtype) if var.dtype.is_integer else (None, None)

        def set_(value: Any, call: BoundCall, origin: str) -> None:
            seen = call._seen
            prev = seen.get(key)
            if prev is not None:
                if prev[0] != value:
                    raise ArgumentValueError(f"{origin}: {name} is {value} here, but {prev[0]} from {prev[1]}")
                return
            if is_size and value < 0:
                raise ArgumentValueError(f"{origin} is {value}, but {name} is a size (non-negative)")
            if lo is not None and not lo <= value <= hi:
                raise ArgumentValueError(f"{origin} is {value}, which does not fit {name}: {var.dtype}")
            seen[key] = (value, origin)

        return set_

    def _match(self, entry: tuple[Any, ...], actual: int, call: BoundCall, pending: list,
               origin: str, arr: np.ndarray, kind: str) -> None:
        tag = entry[0]
        if tag == "const":
            if entry[1] != actual:
                raise ArgumentValueError(f"{origin} must be {entry[1]}, got {describe(arr, kind, actual)}")
        elif tag == "var":
            entry[2](actual, call, origin)
        else:
            pending.append((entry[1], entry[2], actual, origin, describe(arr, kind, actual)))


# ---------------------------------------------------------------------------
# helpers


def _vector_elements(t: Any, what: str) -> tuple[Callable[[np.ndarray], np.ndarray], np.dtype]:
    """A function viewing an array of ``t``'s element dtype, with a trailing axis of its lanes, as ``t`` vectors.

    A ``float32x4`` buffer of shape ``(n,)`` takes a ``float32`` array of shape
    ``(n, 4)`` (what ``loom.nd.empty((n,), "float32x4")`` holds); the view has
    one opaque element per vector, so the shape, stride and alignment checks
    count vectors as the buffer does.  Returns the function and that opaque element dtype.
    """
    lanes, elem = t.lanes, t.element_of().numpy()
    vec = np.dtype(f"V{lanes * elem.itemsize}")

    def view(arr: np.ndarray) -> np.ndarray:
        if arr.dtype != elem:
            raise ArgumentTypeError(f"{what} needs {elem} data with a trailing axis of {lanes} lanes, got an "
                                    f"array of {arr.dtype}")
        if arr.shape[-1:] != (lanes,) or (lanes > 1 and arr.strides[-1] != elem.itemsize):
            raise ArgumentValueError(f"{what} needs a trailing axis of {lanes} contiguous lanes, got shape "
                                     f"{arr.shape} and strides {arr.strides} (bytes)")
        if arr.ndim > 1 and any(s % vec.itemsize for s in arr.strides[:-1]):
            raise ArgumentValueError(f"{what}: array strides {arr.strides} (bytes) are not whole {t} vectors")
        # numpy allows a wider view on a contiguous last axis (checked above): it becomes an axis of 1.
        return arr.view(vec)[..., 0]

    return view, vec


def _aligned_clone(arr: np.ndarray, offset: int, align: int, call: BoundCall, what: str) -> tuple[np.ndarray, int]:
    """A copy of ``arr`` at an ``align``-aligned data pointer, registered to be written back by ``finish``."""
    clone, ptr = aligned_clone(arr, offset, align)
    call._copies.append((arr, clone, np.array(clone, copy=True), what))
    return clone, ptr
