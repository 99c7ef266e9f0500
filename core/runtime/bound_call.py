"""The checked arguments of one call: what :class:`~loom.runtime.arguments.ArgumentChecker` hands a backend.

A :class:`BoundCall` holds, per parameter, the value the backend passes and the
data address of each handle, the binding of every symbolic variable, and the
aligned copies of misaligned arguments, written back when the call finishes.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from ..errors import LoomTypeError
from ..ir import expr as E
from ..target.devices import Device, cpu
from ._values import ArgumentValueError, flat_memory

__all__ = ["BoundCall"]

_CPU = 1


class BoundCall:
    """The checked arguments of one call.

    ``values[k]`` is what the backend passes for parameter ``k``: for a handle
    parameter on the CPU a numpy array (the caller's, or its aligned copy), for
    one on a device the ``loom.nd.NDArray`` (whose memory the host must not
    read); a Python/numpy scalar for scalar parameters.  ``pointers[k]`` is the
    int data address of each handle parameter.  ``binding`` maps each symbolic
    Var of the signature to its value.  Use as a context manager (or call
    :meth:`finish`) so aligned copies are written back.
    """

    __slots__ = ("values", "pointers", "_seen", "_vars", "_from_base", "_device_types", "_copies", "_ranges")

    def __init__(self, n: int, variables: dict[int, E.Var], from_base: Sequence[bool | None],
                 device_types: Sequence[int]) -> None:
        self.values: list[Any] = [None] * n
        #: The data pointer (an int address) of each handle parameter, None for scalars.
        self.pointers: list[int | None] = [None] * n
        self._seen: dict[int, tuple[int, str]] = {}
        self._vars = variables
        self._from_base = from_base
        self._device_types = device_types
        self._copies: list[tuple[np.ndarray, np.ndarray, np.ndarray, str]] = []
        #: Per handle parameter, the memory its argument reaches: (address space, lowest byte, one past the
        #: highest byte), the caller's array even when an aligned copy is passed; None for scalars and empty arrays.
        self._ranges: list[tuple[tuple[int, int], int, int] | None] = [None] * n

    @property
    def binding(self) -> dict[E.Var, Any]:
        """``{Var: value}`` for every symbolic size, stride, offset and scalar parameter."""
        return {self._vars[k]: v for k, (v, _) in self._seen.items()}

    @property
    def devices(self) -> list[Device | None]:
        """The device of each handle parameter's memory (``cpu(0)`` for host arrays), None for scalars."""
        return [None if fb is None else cpu(0) if dt == _CPU else v.device
                for fb, dt, v in zip(self._from_base, self._device_types, self.values)]

    def memory(self, k: int) -> tuple[np.ndarray, int]:
        """The flat 1-D element view of the memory handle parameter ``k`` addresses, and its element offset.

        The view starts at the data pointer the call passes (``pointers[k]``;
        the base array for a buffer with an ``elem_offset``), spans every element
        the array reaches, and is read-only when the argument is.  Backends that
        index memory themselves (the interpreter) use it; the offset is the
        buffer's bound ``elem_offset``.

        :raises LoomTypeError: for a scalar, and for a parameter on a device (its
            memory is not host memory: use ``values[k]`` and ``pointers[k]``).
        """
        from_base = self._from_base[k]
        if from_base is None:
            raise LoomTypeError(f"parameter {k} is a scalar; it has no memory")
        if self._device_types[k] != _CPU:
            raise LoomTypeError(f"parameter {k} is on {self.values[k].device}, whose memory is not host memory; "
                                "use values[k] (the loom.nd.NDArray) and pointers[k] (its data address)")
        return flat_memory(self.values[k], from_base)

    def finish(self) -> None:
        """Write back what the call stored into aligned copies of misaligned arguments."""
        copies, self._copies = self._copies, []
        for orig, clone, snapshot, what in copies:
            bits = np.dtype(f"u{orig.itemsize}") if orig.itemsize in (1, 2, 4, 8) else None
            if bits is not None:  # bits, not values: -0.0 stored over 0.0 is a change (ml_dtypes' too)
                changed = clone.view(bits) != snapshot.view(bits)
            elif orig.dtype.kind == "V":  # wider vector elements (opaque bytes) compare bytewise
                changed = clone != snapshot
            else:
                changed = np.ones(orig.shape, dtype=bool)
            if not changed.any():
                continue
            if not orig.flags.writeable:
                raise ArgumentValueError(f"{what}: the call wrote into a read-only array")
            orig[changed] = clone[changed]

    def __enter__(self) -> BoundCall:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.finish()
