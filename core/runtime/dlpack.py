"""DLPack capsules both ways: export a ``loom.nd.NDArray``, import any producer's tensor.

Two kinds of capsule: the legacy one, a ``DLManagedTensor`` in a PyCapsule
named ``"dltensor"``, and DLPack 1.0's ``DLManagedTensorVersioned`` (named
``"dltensor_versioned"``), which adds a version and ``flags``, among them
:data:`FLAG_READ_ONLY`.  The consumer renames the capsule ``"used_..."`` when
it takes ownership and releases the tensor through its ``deleter``.  A capsule
collected unconsumed calls the deleter itself (its destructor does), so nothing
leaks either way.

:func:`to_capsule` keeps the exported array (and so its memory's owner) alive
until the deleter runs; only a versioned capsule can say an array is read-only,
so a read-only array refuses to export a legacy one.  :func:`from_capsule`
wraps the tensor in an NDArray on the tensor's own device, read-only when the
producer flagged it so, whose owner calls the deleter when the array (and every
view of it) is gone.

>>> import numpy as np
>>> from loom.runtime import nd
>>> a = from_capsule(np.arange(6, dtype="int16").reshape(2, 3)[:, 1:].__dlpack__())
>>> a.shape, a.strides, a.dtype, a.device
((2, 2), (3, 1), 'int16', cpu(0))
>>> b = nd.array([1.5, 2.5])
>>> c = from_capsule(to_capsule(b)); c.numpy()
array([1.5, 2.5])
>>> c.data_ptr == b.data_ptr
True
>>> x = np.zeros(2); x.flags.writeable = False
>>> from_capsule(x.__dlpack__(max_version=(1, 0))).readonly
True
"""

from __future__ import annotations

import ctypes
from typing import Any

import numpy as np

from ..errors import LoomTypeError, LoomValueError
from ..ir.dtype import DataType
from ..target.devices import Device, device_type_name
from .ndarray import NDArray

__all__ = ["DLDevice", "DLDataType", "DLTensor", "DLManagedTensor", "DLPackVersion", "DLManagedTensorVersioned",
           "to_capsule", "from_capsule", "dl_dtype", "loom_dtype", "CAPSULE_NAME", "USED_CAPSULE_NAME",
           "VERSIONED_CAPSULE_NAME", "USED_VERSIONED_CAPSULE_NAME", "FLAG_READ_ONLY", "FLAG_IS_COPIED"]

#: The name of a capsule holding an unconsumed ``DLManagedTensor``.
CAPSULE_NAME = b"dltensor"
#: The name a consumer gives the capsule once it owns the tensor.
USED_CAPSULE_NAME = b"used_dltensor"
#: The name of a capsule holding an unconsumed ``DLManagedTensorVersioned`` (DLPack 1.0).
VERSIONED_CAPSULE_NAME = b"dltensor_versioned"
#: The name a consumer gives a versioned capsule once it owns the tensor.
USED_VERSIONED_CAPSULE_NAME = b"used_dltensor_versioned"
#: ``DLManagedTensorVersioned.flags`` bit: the memory must not be written.
FLAG_READ_ONLY = 1 << 0
#: ``DLManagedTensorVersioned.flags`` bit: the producer copied the data for this export.
FLAG_IS_COPIED = 1 << 1
#: The DLPack major version this module reads and writes.
_MAJOR = 1


class DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class DLTensor(ctypes.Structure):
    _fields_ = [
        ("data", ctypes.c_void_p),
        ("device", DLDevice),
        ("ndim", ctypes.c_int32),
        ("dtype", DLDataType),
        ("shape", ctypes.POINTER(ctypes.c_int64)),
        ("strides", ctypes.POINTER(ctypes.c_int64)),
        ("byte_offset", ctypes.c_uint64),
    ]


class DLManagedTensor(ctypes.Structure):
    pass


DLManagedTensor._fields_ = [("dl_tensor", DLTensor), ("manager_ctx", ctypes.c_void_p),
                            ("deleter", ctypes.CFUNCTYPE(None, ctypes.POINTER(DLManagedTensor)))]


class DLPackVersion(ctypes.Structure):
    _fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32)]


class DLManagedTensorVersioned(ctypes.Structure):
    pass


DLManagedTensorVersioned._fields_ = [
    ("version", DLPackVersion), ("manager_ctx", ctypes.c_void_p),
    ("deleter", ctypes.CFUNCTYPE(None, ctypes.POINTER(DLManagedTensorVersioned))),
    ("flags", ctypes.c_uint64), ("dl_tensor", DLTensor)]

# -- the C API of capsules -----------------------------------------------------------------------------
# Private prototypes (PYFUNCTYPE: called holding the GIL), so that no argtypes of the shared
# ctypes.pythonapi functions change under other libraries.


def _capi(name: str, restype: Any, *argtypes: Any) -> Any:
    return ctypes.PYFUNCTYPE(restype, *argtypes)((name, ctypes.pythonapi))


_is_valid = _capi("PyCapsule_IsValid", ctypes.c_int, ctypes.py_object, ctypes.c_char_p)
_get_pointer = _capi("PyCapsule_GetPointer", ctypes.c_void_p, ctypes.py_object, ctypes.c_char_p)
_set_name = _capi("PyCapsule_SetName", ctypes.c_int, ctypes.py_object, ctypes.c_char_p)
_get_name = _capi("PyCapsule_GetName", ctypes.c_char_p, ctypes.py_object)
_raw_malloc = _capi("PyMem_RawMalloc", ctypes.c_void_p, ctypes.c_size_t)


def _static_string(text: bytes) -> ctypes.c_char_p:
    """A NUL-terminated copy of ``text`` that is never freed (a capsule keeps a pointer to its name)."""
    address = _raw_malloc(len(text) + 1)
    if not address:
        raise MemoryError("no memory for a capsule name")
    ctypes.memmove(address, text + b"\0", len(text) + 1)
    return ctypes.c_char_p(address)


_NAME_BUF = _static_string(CAPSULE_NAME)
_USED_NAME_BUF = _static_string(USED_CAPSULE_NAME)
_VERSIONED_NAME_BUF = _static_string(VERSIONED_CAPSULE_NAME)
_USED_VERSIONED_NAME_BUF = _static_string(USED_VERSIONED_CAPSULE_NAME)

# -- dtypes -------------------------------------------------------------------------------------
_INT, _UINT, _FLOAT, _HANDLE, _BFLOAT, _BOOL = 0, 1, 2, 3, 4, 6
_CODE_OF = {"int": _INT, "uint": _UINT, "float": _FLOAT, "bfloat": _BFLOAT, "handle": _HANDLE}


def dl_dtype(dtype: Any) -> tuple[int, int, int]:
    """DLPack's ``(code, bits, lanes)`` of a Loom dtype (a bool is one byte, as numpy and torch export it).

    >>> dl_dtype("float32"), dl_dtype("bool"), dl_dtype("bfloat16")
    ((2, 32, 1), (6, 8, 1), (4, 16, 1))
    """
    t = DataType.of(dtype)
    if t.is_bool:
        return (_BOOL, 8, t.lanes)
    return (_CODE_OF[t.code], t.bits, t.lanes)


def loom_dtype(code: int, bits: int, lanes: int = 1) -> str:
    """The Loom dtype string of a DLPack dtype; LoomTypeError for one Loom has no name for.

    >>> loom_dtype(1, 8), loom_dtype(6, 8), loom_dtype(2, 32, 4)
    ('uint8', 'bool', 'float32x4')
    """
    names = {_INT: "int", _UINT: "uint", _FLOAT: "float", _BFLOAT: "bfloat", _HANDLE: "handle"}
    if code == _BOOL and bits == 8 and lanes == 1:
        return "bool"
    suffix = f"x{lanes}" if lanes != 1 else ""
    try:
        if code == _HANDLE and lanes != 1:
            raise KeyError(code)
        return str(DataType.of(f"{names[code]}{bits}{suffix}"))
    except (KeyError, LoomTypeError):
        raise LoomTypeError(f"DLPack dtype (code {code}, {bits} bits, {lanes} lanes) has no Loom equivalent") \
            from None


# -- export -----------------------------------------------------------------------------------------
#
# A capsule's destructor and a tensor's deleter run wherever the consumer drops them, often while an
# exception propagates; Python code (a ctypes callback) cannot run then without losing that exception.
# So both are C functions: numpy's, for a numpy *carrier* array whose memory keeps the exported array
# alive.  numpy exports the carrier (its deleter releases the carrier, nothing else), and we overwrite
# the DLTensor's data, device, dtype, shape, strides and offset with the exported array's.


def to_capsule(array: Any, versioned: bool = False) -> Any:
    """A PyCapsule describing ``array`` (a ``loom.nd.NDArray``) without copying it.

    The capsule's tensor holds a reference to ``array`` until the consumer calls
    the tensor's deleter, or until the capsule is collected unconsumed.

    :param versioned: a DLPack 1.0 ``"dltensor_versioned"`` capsule (flagged
        :data:`FLAG_READ_ONLY` for a read-only array) rather than a legacy ``"dltensor"`` one.
    :raises BufferError: for a read-only array and a legacy capsule (which cannot say read-only).
    """
    readonly = bool(array.readonly)
    if readonly and not versioned:
        raise BufferError("cannot export a read-only array through an unversioned DLPack capsule; ask for "
                          "max_version=(1, 0)")
    shape, strides, ndim = array.shape, array.strides, len(array.shape)
    code, bits, lanes = dl_dtype(array.dtype)
    keep = (ctypes.c_uint8 * 1)()
    keep.array = array  # type: ignore[attr-defined]  # the carrier's buffer owns the exported array
    # Extent 2 with stride 0: not contiguous, so numpy fills in (and allocates) strides for every axis.
    carrier = np.ndarray((2,) * ndim, np.uint8, buffer=keep, strides=(0,) * ndim)  # type: ignore[arg-type]
    if versioned:
        capsule = carrier.__dlpack__(max_version=(_MAJOR, 0))
        managed = DLManagedTensorVersioned.from_address(_get_pointer(capsule, _VERSIONED_NAME_BUF))
        managed.flags = (managed.flags & ~FLAG_READ_ONLY) | (FLAG_READ_ONLY if readonly else 0)
        t = managed.dl_tensor
    else:
        capsule = carrier.__dlpack__()
        t = DLManagedTensor.from_address(_get_pointer(capsule, _NAME_BUF)).dl_tensor
    if t.ndim != ndim or (ndim and not (t.shape and t.strides)):
        raise BufferError("numpy exported an unexpected DLPack tensor; cannot export this array")
    t.data = array.handle or None
    t.device = DLDevice(array.device.device_type, array.device.device_id)
    t.dtype = DLDataType(code, bits, lanes)
    for d in range(ndim):
        t.shape[d] = shape[d]
        t.strides[d] = strides[d]
    t.byte_offset = array.byte_offset
    return capsule


# -- import -----------------------------------------------------------------------------------------
# Deleters are called holding the GIL: one that needs it then has it, one that takes it may (re-entrantly).
_CALL_DELETER = ctypes.PYFUNCTYPE(None, ctypes.c_void_p)


class _Imported:
    """The owner of an imported tensor's memory: calls the producer's deleter when collected."""

    __slots__ = ("address", "struct", "__weakref__")

    def __init__(self, address: int, struct: type[ctypes.Structure]) -> None:
        self.address, self.struct = address, struct

    def __del__(self) -> None:
        deleter = ctypes.cast(self.struct.from_address(self.address).deleter, ctypes.c_void_p).value
        if deleter:
            _CALL_DELETER(deleter)(self.address)


def from_capsule(capsule: Any) -> Any:
    """Wrap the tensor of an unconsumed DLPack capsule (legacy or 1.x) in a ``loom.nd.NDArray`` on its device.

    No copy is made: the array shares the producer's memory, and calls the
    tensor's deleter once it (and every view of it) is gone.  A versioned
    tensor flagged :data:`FLAG_READ_ONLY` gives a read-only array.  The capsule
    is marked used.

    :raises LoomTypeError: for anything but an unconsumed DLPack capsule of major
        version 0 or 1, or a dtype Loom lacks.
    """
    if type(capsule).__name__ != "PyCapsule":
        raise LoomTypeError(f"from_capsule needs a DLPack PyCapsule, got {type(capsule).__name__}")
    readonly = False
    struct: type[DLManagedTensor] | type[DLManagedTensorVersioned]
    if _is_valid(capsule, _NAME_BUF):
        used_buf, struct = _USED_NAME_BUF, DLManagedTensor
        address = _get_pointer(capsule, _NAME_BUF)
    elif _is_valid(capsule, _VERSIONED_NAME_BUF):
        used_buf, struct = _USED_VERSIONED_NAME_BUF, DLManagedTensorVersioned
        address = _get_pointer(capsule, _VERSIONED_NAME_BUF)
        managed = DLManagedTensorVersioned.from_address(address)
        if managed.version.major != _MAJOR:  # the rest of the struct may differ: read nothing more
            raise LoomTypeError(f"DLPack tensor of version {managed.version.major}.{managed.version.minor}; "
                                f"Loom reads major version {_MAJOR}")
        readonly = bool(managed.flags & FLAG_READ_ONLY)
    else:
        name = _get_name(capsule)
        if name in (USED_CAPSULE_NAME, USED_VERSIONED_CAPSULE_NAME):
            raise LoomValueError("this DLPack capsule was already consumed")
        raise LoomTypeError(f"expected a DLPack capsule named 'dltensor' or 'dltensor_versioned', got one named "
                            f"{name!r}")
    t = struct.from_address(address).dl_tensor
    ndim = int(t.ndim)
    shape = tuple(int(t.shape[d]) for d in range(ndim))
    strides = tuple(int(t.strides[d]) for d in range(ndim)) if t.strides else None
    dtype = loom_dtype(t.dtype.code, t.dtype.bits, t.dtype.lanes)
    dev_type, dev_id = int(t.device.device_type), int(t.device.device_id)
    try:
        device = Device(dev_type, dev_id)
    except LoomValueError:  # a device type this Loom does not know
        raise LoomTypeError(f"DLPack tensor on unknown device type {device_type_name(dev_type)} "
                            f"(id {dev_id})") from None
    # Everything read: only now take ownership, so a refused capsule still frees itself.
    if _set_name(capsule, used_buf) != 0:
        raise LoomValueError("cannot mark the DLPack capsule used")
    owner = _Imported(address, struct)
    return NDArray(t.data or 0, shape, dtype, device, strides=strides, byte_offset=int(t.byte_offset), owner=owner,
                   readonly=readonly)

