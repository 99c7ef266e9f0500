"""The ``cuda`` backend's stages and its runtime Module.

:class:`CUDABackend` is what the plugin returns from ``loom_backend("cuda")``:

* ``options``: the target's ``arch``, ``fast_math`` and ``nvcc_flags`` (:class:`CUDAOptions`);
* ``render``: every kernel in one CUDA C file (:func:`loom_cuda.codegen.generate`);
* ``compile``: nvcc's cubin for ``arch`` and the PTX (:func:`loom_cuda.nvcc.compile_cuda`),
  packed as one artifact, which the core caches on disk keyed with nvcc's version;
* ``load``: a :class:`CUDAModule`.  Loading needs no GPU: the kernels are
  loaded into the GPU on their first launch.

A build for ``cuda`` gives a host module (llvm by default, c and interp work
too) that checks every argument, including that it lives on the GPU, computes
the grid and block sizes from the symbolic shapes, and launches each kernel
through :meth:`CUDAModule.call_words` (pycuda, the optional extra
``loom-cuda[gpu]``).  Without a CUDA driver or GPU everything builds and
``get_source()`` works; a call raises :class:`~loom_cuda.driver.CUDAUnavailable`.

Kernels launch on the default stream of the GPU holding their arrays (those
Loom allocated; arrays from elsewhere, such as torch's through DLPack, are taken
to be on ``cuda(0)``).
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import attrs

from loom.backend import Backend, BackendOptions, ModuleInfo, pack_sections, unpack_sections
from loom.errors import LoomValueError, SerializationError
from loom.ir.dtype import DataType
from loom.ir.function import IRModule, PrimFunc
from loom.runtime.abi import abi_vars, pack_values, value_of
from loom.runtime.module import Module, Runner, read_export
from loom.target import Target
from loom.target.devices import Device

from .codegen import generate, kernel_symbol, launch_params
from .driver import KernelImage, device_api
from .nvcc import compile_cuda, find_nvcc, nvcc_version

__all__ = ["CUDABackend", "CUDAOptions", "CUDAModule", "FORMAT", "param_kind"]

#: The format name of cuda modules, recorded in exported files.
FORMAT = "cuda"
_CUDA = 2
_AXES = {"x": 0, "y": 1, "z": 2}
_INT64 = DataType("int64")


@attrs.frozen
class CUDAOptions(BackendOptions):
    """What changes a cuda artifact: the GPU architecture, fast math and extra nvcc flags."""

    arch: str = "sm_90"
    fast_math: bool = False
    nvcc_flags: str = ""


def param_kind(t: Any) -> str:
    """The launch-parameter kind (see :meth:`loom_cuda.driver.KernelImage.launch`) of a kernel parameter's dtype.

    >>> from loom.ir.dtype import DataType
    >>> [param_kind(DataType(t)) for t in ("handle", "int32", "uint8", "float16", "bool")]
    ['ptr', 'i32', 'u8', 'f16', 'bool']
    """
    if t.is_handle:
        return "ptr"
    if t.is_bool:
        return "bool"
    if t.is_float and t.code == "float":
        return f"f{t.bits}"
    if t.is_uint:
        return f"u{t.bits}"
    if t.is_int:
        return f"i{t.bits}"
    raise LoomValueError(f"a CUDA kernel cannot take a parameter of type {t}")


@attrs.frozen
class _Launch:
    """How one kernel is launched: its symbol, parameters and where each launch extent goes."""

    symbol: str
    params: tuple[tuple[str, Any], ...]  # (kind, dtype) per kernel parameter
    axes: tuple[tuple[int, int], ...]  # (0 grid / 1 block, axis) per launch parameter
    nslots: int

    @classmethod
    def of(cls, name: str, func: PrimFunc) -> _Launch:
        params, _ = launch_params(func)
        axes = []
        for tag in func.attrs.get("tir.kernel_launch_params", ()):
            scope, _, axis = str(tag).partition(".")
            if scope not in ("blockIdx", "threadIdx") or axis not in _AXES:
                raise LoomValueError(f"kernel {name}: cannot launch over thread tag {tag!r}")
            axes.append((0 if scope == "blockIdx" else 1, _AXES[axis]))
        return cls(kernel_symbol(name, func), tuple((param_kind(p.dtype), p.dtype) for p in params), tuple(axes),
                   len(abi_vars(func)))


class CUDAModule(Module):
    """Kernels compiled by nvcc, launched through pycuda on the GPU of their arrays.

    ``get_source()`` is the CUDA C, ``get_source("ptx")`` the PTX.  Host modules
    call the kernels (:meth:`call_words`); a kernel can also be called from
    Python with arrays on the GPU, given its launch extents after its arguments.
    """

    format = FORMAT

    def __init__(self, info: ModuleInfo, cubin: bytes, ptx: str) -> None:
        self.target = Target(info.target)
        self.cubin, self.ptx = bytes(cubin), ptx
        self._source = info.sources.get("cu", "")
        self._launches = {n: _Launch.of(n, f) for n, f in info.functions.items()}
        self._image: Any = None
        super().__init__(dict(info.functions), info.entry or None, device=Device(_CUDA, 0))

    def _kernels(self) -> Any:
        if self._image is None:
            self._image = KernelImage(self.cubin, self.ptx, 0)
        return self._image

    def call_words(self, name: str, words: Sequence[int]) -> None:
        """Launch kernel ``name``: its parameters' words, then one extent per launch parameter."""
        launch = self._launches.get(name)
        if launch is None:
            raise LoomValueError(f"the cuda module has no kernel {name!r}; it has {sorted(self._launches)}")
        n = len(launch.params)
        dims = [[1, 1, 1], [1, 1, 1]]
        for (which, axis), word in zip(launch.axes, words[n:]):
            dims[which][axis] = int(value_of(_INT64, word))
        values = [(kind, value_of(t, w)) for (kind, t), w in zip(launch.params, words[:n])]
        self._kernels().launch(launch.symbol, tuple(dims[0]), tuple(dims[1]), values,
                               device_id=self._device_of(name, values))

    @staticmethod
    def _device_of(name: str, values: list[tuple[str, Any]]) -> int:
        """The GPU the kernel runs on: that of its arrays (those Loom allocated; others are taken to be on
        cuda(0)); arrays on different GPUs are an error."""
        api = device_api()
        found = {d for kind, v in values if kind == "ptr" and (d := api.ordinal_of(v)) is not None}
        if len(found) > 1:
            raise LoomValueError(f"kernel {name}: its arrays are on different GPUs "
                                 f"({', '.join(f'cuda({d})' for d in sorted(found))}); one launch runs on one GPU")
        return found.pop() if found else 0

    def _make_runner(self, name: str, func: PrimFunc) -> Runner:
        slots = abi_vars(func)

        def run(call: Any) -> None:
            self.call_words(name, pack_values(slots, call))

        return run

    def _synchronize(self) -> None:
        device_api().synchronize(self.device)

    def get_source(self, fmt: str = "") -> str:
        if fmt in ("", "cu", "cuda"):
            return self._source
        if fmt == "ptx":
            return self.ptx
        raise LoomValueError(f"a cuda module has sources 'cu' (CUDA C) and 'ptx', not {fmt!r}")

    def _export_payload(self) -> bytes:
        return pack_sections({"cubin": self.cubin, "ptx": self.ptx})

    def _export_header(self) -> dict[str, Any]:
        return {"info": self.info.to_json()} if self.info is not None else {}


def load_exported(path: str) -> CUDAModule:
    """A :class:`CUDAModule` from the file its ``export_library`` wrote."""
    header, payload = read_export(path)
    info = header.get("info")
    if not isinstance(info, str):
        raise SerializationError(f"{path}: not an exported cuda module (no module info)")
    return module_from_artifact(payload, ModuleInfo.from_json(info, path))


def module_from_artifact(data: bytes, info: ModuleInfo) -> CUDAModule:
    """A :class:`CUDAModule` from what :meth:`CUDABackend.compile` returned."""
    parts = unpack_sections(data, "cuda artifact")
    if set(parts) != {"cubin", "ptx"}:
        raise SerializationError(f"cuda artifact: expected the sections cubin and ptx, got {sorted(parts)}")
    try:
        ptx = parts["ptx"].decode("utf-8")
    except UnicodeDecodeError:
        raise SerializationError("cuda artifact: the PTX is not UTF-8 text") from None
    return CUDAModule(info, parts["cubin"], ptx)


class CUDABackend(Backend):
    """The ``cuda`` kind's stages (see the module docstring)."""

    kind = FORMAT
    version = "1"
    artifact_suffix = ".cuda"
    thread_semantics = "gpu"

    def options(self, target: Target) -> CUDAOptions:
        return CUDAOptions(str(target.attrs.get("arch", "sm_90")), bool(target.attrs.get("fast_math", False)),
                           str(target.attrs.get("nvcc_flags", "") or ""))

    def compiler_identity(self, options: BackendOptions) -> str:
        nvcc = find_nvcc()
        return f"{nvcc}: {nvcc_version(nvcc)}" if nvcc else "no nvcc"

    def render(self, mod: IRModule, options: BackendOptions) -> Mapping[str, str]:
        assert isinstance(options, CUDAOptions)
        return {"cu": generate(mod, fast_math=options.fast_math)}

    def compile(self, sources: Mapping[str, str], options: BackendOptions) -> bytes:
        assert isinstance(options, CUDAOptions)
        cubin, ptx = compile_cuda(sources["cu"], options.arch, options.fast_math, options.nvcc_flags)
        return pack_sections({"cubin": cubin, "ptx": ptx})

    def load(self, data: bytes, info: ModuleInfo) -> CUDAModule:
        return module_from_artifact(data, info)
