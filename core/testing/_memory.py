"""Memory and bounds-checked buffer access.

A :class:`Memory` is what a ``handle`` variable holds: a flat, contiguous 1-D
numpy view of an allocation (an argument array, or an ``Allocate``).  A buffer
in the body finds its memory through its ``data`` Var and reads element
``elem_offset + sum(index * stride)`` of it.  Every access is checked before
it happens: each index against the buffer's declared shape (unless
``check_dims`` is off) and always the flat offset against the memory, so a
bad program raises :class:`OutOfBoundsError` instead of wrapping around or
writing outside.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from ..errors import LoomValueError
from ..ir import expr as E
from ..ir.dtype import DataType
from ..ir.stmt import BufferStore
from ..runtime.device_api import DevicePointer
from ._codegen import Code, function
from ._errors import InterpreterError, OutOfBoundsError
from ._launch import track_lanes, track_read, track_write
from . import _values as V

__all__ = ["Memory", "compile_load", "compile_store", "element_count"]


class Memory:
    """A flat view of one allocation, typed by its element dtype ``tag``."""

    __slots__ = ("arr", "mv", "size", "tag", "name", "_views")

    def __init__(self, arr: np.ndarray, name: str) -> None:
        self.arr = arr
        self.size = arr.shape[0]
        self.tag = V.tag(DataType.of(arr.dtype))
        self.name = name
        # memoryview items are Python ints/bools: the interpreter's own representation.
        self.mv = arr.data if arr.dtype.kind in "iub" else None  # memoryview(arr)
        self._views: dict[str, Memory] = {}

    @staticmethod
    def allocate(t: DataType, count: int, name: str) -> Memory:
        """``count`` elements of ``t``, filled with a fixed pattern so reads before writes show."""
        arr = np.empty(count * t.lanes, dtype=V.np_dtype(t))
        if t.is_float:
            arr.fill(np.nan)
        elif t.is_bool:
            arr.fill(True)
        else:
            arr.view(np.uint8).fill(0x5A)
        return Memory(arr, name)

    def view_as(self, tag: str) -> Memory:
        """The same bytes read as elements of another dtype (storage reuse)."""
        found = self._views.get(tag)
        if found is None:
            npd = DataType.of(tag).numpy()
            raw = self.arr.view(np.uint8)
            raw = raw[: raw.shape[0] // npd.itemsize * npd.itemsize]
            found = self._views[tag] = Memory(raw.view(npd), self.name)
        return found

    def __repr__(self) -> str:
        return f"Memory({self.name!r}, {self.tag}, {self.size} elements)"


def element_count(fname: str, name: str, extents: list[Callable[[list], Any]], f: list) -> int:
    """The number of elements an ``Allocate`` of ``name`` asks for; an error for a negative extent."""
    count = 1
    for fn in extents:
        n = fn(f)
        if n < 0:
            raise InterpreterError(f"{fname}: allocate {name} with a negative extent {n}")
        count *= n
    return count


def _reporter(fname: str, buf: Any, what: str) -> Callable[..., None]:
    """The slow path that builds the out-of-bounds message."""

    def report(mem: Memory, indices: tuple[Any, ...], offset: Any, extents: tuple[Any, ...] | None = None) -> None:
        idx = ", ".join(_show(x) for x in indices)
        if extents is not None:
            for d, (x, n) in enumerate(zip(indices, extents)):
                xs = np.asarray(x)
                if xs.size and (xs.min() < 0 or xs.max() >= n):
                    raise OutOfBoundsError(
                        f"{fname}: out-of-bounds {what} {buf.name}[{idx}]: index {_show(x)} of dimension {d} "
                        f"is outside [0, {n}) (shape {tuple(int(e) for e in extents)})")
        raise OutOfBoundsError(
            f"{fname}: out-of-bounds {what} {buf.name}[{idx}]: flat element offset {_show(offset)} is outside "
            f"the {mem.size} elements of {mem.name}'s memory")

    return report


def _show(x: Any) -> str:
    return str(x.tolist()) if isinstance(x, np.ndarray) else str(x)


def _write_failed(fname: str, buf: Any) -> Callable[[Memory, Any], None]:
    def fail(mem: Memory, value: Any) -> None:
        if not mem.arr.flags.writeable:
            raise InterpreterError(f"{fname}: store to {buf.name}, but its memory ({mem.name}) is a read-only array")
        raise InterpreterError(f"{fname}: cannot store {value!r} into {buf.name} ({mem.tag})")

    return fail


class _Access:
    """What a load and a store share: the buffer's memory slot, offset and checks."""

    def __init__(self, comp: Any, buf: Any, indices: tuple[E.PrimExpr, ...], what: str) -> None:
        shape, strides = buf.shape, buf.effective_strides()
        if len(indices) != len(shape):
            if shape or len(indices) != 1:
                raise LoomValueError(f"{comp.fname}: {what} {buf.name} with {len(indices)} indices, "
                                     f"but the buffer has {len(shape)} dimensions")
            strides = (E.IntImm(indices[0].dtype, 1),)  # a shapeless buffer is a pointer
        self.buf = buf
        self.fname = comp.fname
        self.t = buf.dtype
        self.data = comp.data_slot(buf)
        self.tag = V.tag(buf.dtype)
        self.check_tag = comp.memory_tag(buf.data) is not self.tag
        self.indices = [comp.expr(i) for i in indices]
        self.extents = [comp.expr(n) for n in shape] if comp.check_dims and len(shape) == len(indices) else None
        self.strides = [comp.expr(s) for s in strides]
        self.eo = comp.expr(buf.elem_offset)
        self.oob = _reporter(comp.fname, buf, what)
        self.scalar = buf.dtype.lanes == 1 and all(i.dtype.lanes == 1 for i in indices)
        self.write_failed = _write_failed(comp.fname, buf)
        region = comp.region
        # Shared memory of a launch region: every access is recorded for race detection.
        self.shared = region is not None and id(buf.data) in region.shared_vars
        self.thr = region.thr_slot if self.shared else -1
        self.device = id(buf.data) in comp.device_vars

    def template(self, value: Code | None) -> tuple[str, list[Code]]:
        """The body of the scalar fast path, up to the bounds-checked access ``ACCESS``."""
        ops: list[Code] = []

        def use(code: Code) -> str:
            ops.append(code)
            return "{%d}" % (len(ops) - 1)

        n = len(self.indices)
        lines = ["mem = f[DATA]"] + [f"x{d} = {use(c)}" for d, c in enumerate(self.indices)]
        if value is not None:
            lines.append(f"v = {use(value)}")
        xs = "(" + "".join(f"x{d}, " for d in range(n)) + ")"
        if self.extents is not None and n:
            exts = [use(e) for e in self.extents]
            cond = " and ".join(f"0 <= x{d} < {e}" for d, e in enumerate(exts))
            lines += [f"if not ({cond}):", f"    OOB(mem, {xs}, None, ({''.join(e + ', ' for e in exts)}))"]
        terms = [] if self.eo.is_const and self.eo.const == 0 else [use(self.eo)]
        for d, s in enumerate(self.strides):
            terms.append(f"x{d}" if s.is_const and s.const == 1 else f"x{d} * {use(s)}")
        lines.append(f"off = {' + '.join(terms) or '0'}")
        if self.check_tag:
            lines += ["if mem.tag is not TAG:", "    mem = mem.view_as(TAG)"]
        lines += ["if 0 <= off < mem.size:", "    ACCESS", f"OOB(mem, {xs}, off)"]
        return "\n".join(lines), ops

    def env(self) -> dict[str, Any]:
        return {"DATA": self.data, "TAG": self.tag, "OOB": self.oob, "FAILED": self.write_failed, "THR": self.thr,
                "BUF": self.buf}

    def finish(self, code: Code, verb: str) -> Code:
        """``code`` as compiled, refused at run time when the memory is a device pointer (host code)."""
        if not self.device:
            return code
        slot, inner, fname, name = self.data, code.fn, self.fname, self.buf.name

        def guarded(f: list) -> Any:
            ptr = f[slot]
            if type(ptr) is DevicePointer:
                raise InterpreterError(f"{fname}: host code {verb} buffer {name}, whose memory is on {ptr.device}; "
                                       "only kernels may access device memory")
            return inner(f)

        return Code(guarded)

    def offsets(self, f: list) -> tuple[Memory, Any, list[Any]]:
        """The generic (vector) path: memory, flat offsets (int or int64 array), indices."""
        mem = f[self.data]
        if mem.tag is not self.tag:
            mem = mem.view_as(self.tag)
        xs = [c.fn(f) for c in self.indices]
        if self.extents is not None:
            exts = tuple(c.fn(f) for c in self.extents)
            for x, n in zip(xs, exts):
                xa = np.asarray(x)
                if xa.min() < 0 or xa.max() >= n:
                    self.oob(mem, tuple(xs), None, exts)
        off: Any = self.eo.fn(f)
        for x, s in zip(xs, self.strides):
            off = off + (x.astype(np.int64) if isinstance(x, np.ndarray) else int(x)) * s.fn(f)
        lanes = self.t.lanes
        if lanes > 1:
            off = (np.asarray(off, dtype=np.int64)[..., None] * lanes + np.arange(lanes)).reshape(-1)
        oa = np.asarray(off)
        if oa.min() < 0 or oa.max() >= mem.size:
            self.oob(mem, tuple(xs), off)
        return mem, off, xs


def compile_load(comp: Any, node: E.BufferLoad) -> Code:
    """A closure reading ``buffer[indices]`` (a gather for vector indices)."""
    acc = _Access(comp, node.buffer, node.indices, "load of")
    if not acc.scalar:
        thr, buf = acc.thr, acc.buf

        def gather(f: list) -> np.ndarray:
            mem, off, _ = acc.offsets(f)
            if thr >= 0:
                track_lanes(track_read, f[thr], mem, off, buf)
            return mem.arr[off]

        return acc.finish(Code(gather), "reads")
    body, ops = acc.template(None)
    field = "mv" if V.kind(acc.t) in ("int", "bool") else "arr"
    access = f"return mem.{field}[off]"
    if acc.shared:
        access = "TRACK(f[THR], mem, off, BUF)\n    " + access
    return acc.finish(function(body.replace("ACCESS", access), ops, TRACK=track_read, **acc.env()), "reads")


def compile_store(comp: Any, node: BufferStore) -> Code:
    """A closure writing ``buffer[indices] = value`` (a scatter for vector indices)."""
    acc = _Access(comp, node.buffer, node.indices, "store to")
    value = comp.expr(node.value)
    if not acc.scalar:
        get, thr, buf = value.fn, acc.thr, acc.buf

        def scatter(f: list) -> None:
            mem, off, _ = acc.offsets(f)
            v = get(f)
            if thr >= 0:
                track_lanes(track_write, f[thr], mem, off, buf)
            try:
                mem.arr[off] = v
            except ValueError:
                acc.write_failed(mem, v)

        return acc.finish(Code(scatter), "stores")
    body, ops = acc.template(value)
    k = V.kind(acc.t)
    write = {"int": "mem.mv[off] = v", "bool": "mem.mv[off] = bool(v)"}.get(k, "mem.arr[off] = v")
    access = f"try:\n        {write}\n    except (TypeError, ValueError):\n        FAILED(mem, v)\n    return None"
    if acc.shared:
        access = "TRACK(f[THR], mem, off, BUF)\n    " + access
    return acc.finish(function(body.replace("ACCESS", access), ops, TRACK=track_write, **acc.env()), "stores")
