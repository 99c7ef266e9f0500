"""A fake ``pycuda`` standing in for the GPU and CUDA driver that the test machines lack.

:class:`FakeCUDA` builds a ``pycuda`` package and its ``pycuda.driver`` module
with the subset of pycuda's API that :mod:`loom_cuda.driver` uses, and installs
them in ``sys.modules`` for one test.  Nothing here runs on a GPU:

* device memory is host ``bytearray`` s at fake, 256-byte aligned addresses; a copy
  that does not fit in one allocation fails as the driver does (``LogicError``,
  ``invalid argument``), and so does any call without a current context;
* contexts are tracked per thread (each thread has its own stack, as in CUDA);
* "cubins" are ``b"FAKECUBIN sm_XY name name..."`` and load only on a GPU of that
  major architecture with at least that minor; PTX is real-looking text whose
  ``.target`` and ``.entry`` lines the fake JIT reads;
* kernels do not run: each launch is recorded (:class:`Launch`) with the bytes
  pycuda would pack, and advances a fake device clock that events read.

Tests use it as ``fake = FakeCUDA(); fake.install(monkeypatch)``.
"""

from __future__ import annotations

import re
import struct
import sys
import threading
import types
from dataclasses import dataclass, field
from typing import Any

ALIGN = 256
BASE_ADDRESS = 0x7F00_0000_0000


@dataclass
class Launch:
    """One recorded kernel launch."""

    symbol: str
    device: int
    grid: tuple
    block: tuple
    format: str
    packed: bytes
    shared_size: int
    stream: Any
    thread: int

    def values(self) -> tuple:
        """The parameters unpacked from the bytes, as the kernel would read them."""
        return struct.unpack(self.format, self.packed)


@dataclass
class FakeCUDA:
    """A fake CUDA driver with one GPU per entry of ``capabilities`` and ``memory_bytes`` of memory on each."""

    capabilities: tuple = ((9, 0),)
    memory_bytes: int = 1 << 20
    init_error: str | None = None
    launch_ms: float = 1.5  # device time each launch takes, as the events see it
    launches: list = field(default_factory=list)
    calls: dict = field(default_factory=dict)  # counts per operation
    memory: dict = field(default_factory=dict)  # address -> (device, bytearray)
    injected: dict = field(default_factory=dict)  # operation -> exception to raise once
    clock_ms: float = 0.0
    pushes: list = field(default_factory=list)  # (thread id, device) per push

    def __post_init__(self) -> None:
        self._next = {d: BASE_ADDRESS + (d << 36) for d in range(len(self.capabilities))}
        self._tls = threading.local()
        self._lock = threading.Lock()
        self.driver = _build_driver(self)
        self.package = types.ModuleType("pycuda")
        self.package.driver = self.driver  # type: ignore[attr-defined]
        self.package.VERSION = (2025, 1, 0)  # type: ignore[attr-defined]

    def install(self, monkeypatch: Any) -> FakeCUDA:
        monkeypatch.setitem(sys.modules, "pycuda", self.package)
        monkeypatch.setitem(sys.modules, "pycuda.driver", self.driver)
        return self

    # ------------------------------------------------------------------ helpers for the fake and the tests

    def count(self, op: str) -> None:
        with self._lock:
            self.calls[op] = self.calls.get(op, 0) + 1

    def stack(self) -> list:
        """The calling thread's context stack."""
        if not hasattr(self._tls, "stack"):
            self._tls.stack = []
        return self._tls.stack

    def current(self, api: str) -> Any:
        """The current context, or the driver's error for a call without one."""
        s = self.stack()
        if not s:
            raise self.driver.LogicError(f"{api} failed: invalid device context")
        return s[-1]

    def check_injected(self, op: str) -> None:
        err = self.injected.pop(op, None)
        if err is not None:
            raise err

    def find(self, api: str, address: int, nbytes: int) -> tuple[bytearray, int]:
        """The allocation holding ``nbytes`` at ``address`` and the offset, or ``invalid argument``."""
        for start, (_, buf) in self.memory.items():
            if start <= address and address + nbytes <= start + len(buf):
                return buf, address - start
        raise self.driver.LogicError(f"{api} failed: invalid argument")

    def read(self, address: int, nbytes: int) -> bytes:
        buf, off = self.find("test read", address, nbytes)
        return bytes(buf[off:off + nbytes])


def _build_driver(fake: FakeCUDA) -> types.ModuleType:
    drv = types.ModuleType("pycuda.driver")

    class Error(Exception):
        pass

    class MemoryError(Error):  # pycuda's names, shadowing the builtins as in pycuda.driver
        pass

    class LogicError(Error):
        pass

    class LaunchError(Error):
        pass

    class RuntimeError(Error):
        pass

    for cls in (Error, MemoryError, LogicError, LaunchError, RuntimeError):
        setattr(drv, cls.__name__, cls)

    def init(flags: int = 0) -> None:
        fake.count("init")
        if fake.init_error:
            raise RuntimeError(f"cuInit failed: {fake.init_error}")

    class Context:
        def __init__(self, device: int) -> None:
            self.device = device

        def push(self) -> None:
            fake.stack().append(self)
            fake.pushes.append((threading.get_ident(), self.device))

        @staticmethod
        def pop() -> None:
            s = fake.stack()
            if not s:
                raise LogicError("cuCtxPopCurrent failed: invalid device context")
            s.pop()

        @staticmethod
        def get_current() -> Any:
            s = fake.stack()
            return s[-1] if s else None

        @staticmethod
        def synchronize() -> None:
            fake.current("cuCtxSynchronize")
            fake.count("synchronize")
            fake.check_injected("synchronize")

    primaries = [Context(d) for d in range(len(fake.capabilities))]

    class Device:
        def __init__(self, ordinal: int) -> None:
            if not 0 <= ordinal < len(fake.capabilities):
                raise LogicError("cuDeviceGet failed: invalid device ordinal")
            self.ordinal = ordinal

        @staticmethod
        def count() -> int:
            return len(fake.capabilities)

        def compute_capability(self) -> tuple:
            return fake.capabilities[self.ordinal]

        def retain_primary_context(self) -> Context:
            fake.count("retain_primary_context")
            return primaries[self.ordinal]

    class DeviceAllocation:
        def __init__(self, address: int) -> None:
            self.address = address

        def __int__(self) -> int:
            return self.address

        __index__ = __int__

        def free(self) -> None:
            fake.current("cuMemFree")
            if fake.memory.pop(self.address, None) is None:
                raise LogicError("cuMemFree failed: invalid argument")

    def mem_alloc(nbytes: int) -> DeviceAllocation:
        ctx = fake.current("cuMemAlloc")
        fake.check_injected("mem_alloc")
        used = sum(len(b) for d, b in fake.memory.values() if d == ctx.device)
        if nbytes <= 0:
            raise LogicError("cuMemAlloc failed: invalid argument")
        if used + nbytes > fake.memory_bytes:
            raise MemoryError("cuMemAlloc failed: out of memory")
        address = fake._next[ctx.device]
        fake._next[ctx.device] += -(-nbytes // ALIGN) * ALIGN
        fake.memory[address] = (ctx.device, bytearray(nbytes))
        return DeviceAllocation(address)

    def memcpy_htod(dest: Any, src: Any) -> None:
        fake.current("cuMemcpyHtoD")
        data = memoryview(src).cast("B")
        buf, off = fake.find("cuMemcpyHtoD", int(dest), data.nbytes)
        buf[off:off + data.nbytes] = data

    def memcpy_dtoh(dest: Any, src: Any) -> None:
        fake.current("cuMemcpyDtoH")
        out = memoryview(dest).cast("B")
        buf, off = fake.find("cuMemcpyDtoH", int(src), out.nbytes)
        out[:] = buf[off:off + out.nbytes]

    def memcpy_dtod(dest: Any, src: Any, size: int) -> None:
        fake.current("cuMemcpyDtoD")
        sbuf, soff = fake.find("cuMemcpyDtoD", int(src), size)
        dbuf, doff = fake.find("cuMemcpyDtoD", int(dest), size)
        dbuf[doff:doff + size] = bytes(sbuf[soff:soff + size])

    class Function:
        def __init__(self, module: Module, symbol: str) -> None:
            self.module, self.symbol = module, symbol
            self.arg_format = None

        def prepare(self, arg_types: str) -> Function:
            fake.count("prepare")
            self.arg_format = arg_types
            return self

        def _launch(self, grid: tuple, block: tuple, stream: Any, args: tuple, shared_size: int) -> None:
            ctx = fake.current("cuLaunchKernel")
            if ctx.device != self.module.device:
                raise LogicError("cuLaunchKernel failed: invalid resource handle")
            fake.check_injected("launch")
            if shared_size > 48 * 1024:
                raise LogicError("cuLaunchKernel failed: invalid argument")
            packed = struct.pack(self.arg_format, *args)  # native alignment, as pycuda's packer
            fake.launches.append(Launch(self.symbol, ctx.device, tuple(grid), tuple(block), self.arg_format,
                                        packed, shared_size, stream, threading.get_ident()))
            fake.clock_ms += fake.launch_ms

        def prepared_call(self, grid: tuple, block: tuple, *args: Any, shared_size: int = 0) -> None:
            self._launch(grid, block, None, args, shared_size)

        def prepared_async_call(self, grid: tuple, block: tuple, stream: Any, *args: Any, shared_size: int = 0) -> None:
            self._launch(grid, block, stream, args, shared_size)

    class Module:
        def __init__(self, device: int, symbols: list, source: str) -> None:
            self.device, self.symbols, self.source = device, symbols, source

        def get_function(self, name: str) -> Function:
            fake.current("cuModuleGetFunction")
            if name not in self.symbols:
                raise LogicError("cuModuleGetFunction failed: named symbol not found")
            return Function(self, name)

    def module_from_buffer(buffer: bytes, options: Any = None, message_handler: Any = None) -> Module:
        ctx = fake.current("cuModuleLoadDataEx")
        fake.count("module_from_buffer")
        fake.check_injected("module_from_buffer")
        data = bytes(buffer)
        major, minor = fake.capabilities[ctx.device]
        if data.startswith(b"FAKECUBIN "):
            arch, *symbols = data.decode().split()[1:]
            cmaj, cmin = int(arch[3:-1]), int(arch[-1])
            if cmaj != major or cmin > minor:
                raise RuntimeError("cuModuleLoadDataEx failed: no kernel image is available for execution on the device")
            return Module(ctx.device, symbols, "cubin")
        if not data.endswith(b"\0") or b".version" not in data:
            raise LogicError("cuModuleLoadDataEx failed: device kernel image is invalid")
        text = data[:-1].decode()
        target = re.search(r"\.target\s+sm_(\d+)(\d)", text)
        if target is None or (int(target.group(1)), int(target.group(2))) > (major, minor):
            if message_handler is not None:
                message_handler(False, "", "ptxas fatal   : SM version specified by .target is higher than default")
            raise LogicError("cuModuleLoadDataEx failed: a PTX JIT compilation failed")
        if message_handler is not None:
            message_handler(True, "ptxas info: compiled", "")
        return Module(ctx.device, re.findall(r"\.entry\s+(\w+)", text), "ptx")

    class Event:
        def __init__(self, flags: int = 0) -> None:
            fake.current("cuEventCreate")
            self.time: float | None = None

        def record(self, stream: Any = None) -> Event:
            fake.current("cuEventRecord")
            self.time = fake.clock_ms
            return self

        def synchronize(self) -> Event:
            fake.count("event_synchronize")
            return self

        def time_since(self, event: Event) -> float:
            if self.time is None or event.time is None:
                raise LogicError("cuEventElapsedTime failed: invalid resource handle")
            return self.time - event.time

    class Stream:
        def __init__(self, flags: int = 0) -> None:
            self.device = fake.current("cuStreamCreate").device

    for obj in (init, Context, Device, DeviceAllocation, mem_alloc, memcpy_htod, memcpy_dtoh, memcpy_dtod,
                Function, Module, module_from_buffer, Event, Stream):
        setattr(drv, obj.__name__, obj)
    return drv


def fake_cubin(arch: str, *symbols: str) -> bytes:
    """A cubin the fake loads on GPUs of architecture ``arch`` (``"sm_90"``), defining ``symbols``."""
    return " ".join(("FAKECUBIN", arch) + symbols).encode()


def fake_ptx(arch: str, *symbols: str) -> str:
    """PTX text for ``.target arch`` with one ``.entry`` per symbol."""
    entries = "".join(f".visible .entry {s}(\n.param .u64 {s}_p0\n)\n{{\nret;\n}}\n" for s in symbols)
    return f".version 8.0\n.target {arch}\n.address_size 64\n{entries}"
