"""The ``interp`` target's runtime Module: lowered programs run on the reference interpreter.

``loom.build(..., target="interp")`` returns an :class:`InterpModule`.  It needs
no compiler or device, checks arguments exactly as compiled backends do (the
shared :class:`~loom.runtime.arguments.ArgumentChecker`), and then runs the
function with :class:`loom.testing.Interpreter`, which adds bounds checks on
every access, so it is the oracle every backend is compared with.  A failing
``AssertStmt`` raises :class:`loom.testing.AssertionFailed` at call time.

Functions of the module may call each other (a host function launching the
``<name>_kernel<k>`` device functions of SplitHostDevice through a ``Call`` of a
``GlobalVar``), and functions of the modules it imports (linked by
:mod:`loom.runtime.linking`; arguments cross as native ABI words).  Thread-bound
regions run with GPU semantics (blocks of threads meeting at barriers).  Other
modules call this one's functions through :meth:`InterpModule.call_words`, whose
pointer arguments are addresses in the memory of the module's :attr:`device`.

:class:`InterpBackend` is the ``interp`` kind's backend: its "source" and its
"compiled artifact" are both the IRModule as ``loom.save_json`` text, which is
also what exported files carry (with the modules they import embedded).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Mapping, Sequence

from ..backend.base import Backend, BackendOptions, ModuleInfo
from ..errors import LoomTypeError, LoomValueError, SerializationError
from ..ir.function import IRModule, PrimFunc
from ..ir.serialize import load_json, save_json
from ..target.devices import Device
from ..target.target import Target
from .module import Module, Runner, lowered_functions, read_export

if TYPE_CHECKING:
    from ..testing.interpreter import Interpreter

__all__ = ["InterpModule", "InterpBackend", "FORMAT"]

#: The export format name of interp modules.
FORMAT = "interp"


class InterpModule(Module):
    """Runs the PrimFuncs of a lowered IRModule on the reference interpreter.

    :param mod: the lowered module (after MakeAPI, or any flattened PrimFuncs).
    :param target: the ``interp`` target it was built for (default: the
        module's ``attrs["target"]``, else ``Target("interp")``).
    :param entry_name: the function ``module(*args)`` calls (default: ``main``,
        else the first function that is not a device kernel).
    """

    format = FORMAT

    def __init__(self, mod: IRModule, target: Target | None = None, entry_name: str | None = None,
                 device: Device | None = None) -> None:
        prims = lowered_functions(mod, type(self).__name__)
        self.ir_module = mod
        self.target = target if target is not None else mod.attrs.get("target", None) or Target("interp")
        self._interpreters: dict[str, Interpreter] = {}
        self._providers: dict[str, Module] = {}
        super().__init__(prims, entry_name, device=device)
        # Compile the host functions now so malformed IR fails at build time, not on the first call.
        # Device kernels compile when a host function first calls them (or when fetched directly).
        for name, func in prims.items():
            if func.attrs.get("calling_conv") != "device_kernel":
                self._interpreter(name)

    def _interpreter(self, name: str) -> Interpreter:
        found = self._interpreters.get(name)
        if found is None:
            # Lazy: loom.testing imports the runtime's argument checker.
            from ..testing.interpreter import Interpreter

            found = self._interpreters[name] = Interpreter(self.ir_module, name, imports=self._resolve_import)
        return found

    # -- calls between modules -------------------------------------------------------
    def _resolve_import(self, name: str) -> Callable[[list[int]], None] | None:
        provider = self._providers.get(name)
        if provider is None:
            return None
        call = provider.call_words
        return lambda words: call(name, words)

    def link_import(self, name: str, provider: Module) -> None:
        self._providers[name] = provider

    def call_words(self, name: str, words: Sequence[int]) -> None:
        """Run ``name`` on native-ABI words; pointers are addresses in :attr:`device`'s memory."""
        if name not in self._signatures:
            raise LoomValueError(f"{self.type_key} module has no function {name!r}; it has {sorted(self._signatures)}")
        self._interpreter(name).run_words(words, self.device)

    def _make_runner(self, name: str, func: PrimFunc) -> Runner:
        # The PackedFunc has checked the call (once); the interpreter only binds it.
        return self._interpreter(name).run_checked

    def get_source(self, fmt: str = "") -> str:
        """The lowered IR: printed text (``fmt`` ``""``, ``"tir"`` or ``"text"``) or ``"json"``."""
        if fmt in ("", "tir", "text"):
            return str(self.ir_module)
        if fmt == "json":
            return save_json(self.ir_module)
        raise LoomValueError(f"interp module source formats are '', 'tir', 'text' and 'json'; got {fmt!r}")

    def _export_payload(self) -> bytes:
        return save_json(self.ir_module).encode("utf-8")

    def _export_header(self) -> dict[str, Any]:
        from .linking import pack_modules

        return {"target": str(self.target), "imports": list(self.imports),
                "embedded": pack_modules(self.imported_modules) if self.imported_modules else ""}

    @classmethod
    def load(cls, path: str) -> InterpModule:
        """Rebuild a module from a file its :meth:`export_library` wrote."""
        header, payload = read_export(path)
        try:
            text = payload.decode("utf-8")
        except UnicodeDecodeError as err:
            raise SerializationError(f"{path!r}: the interp module payload is not UTF-8 JSON ({err})") from None
        mod = load_json(text)
        if not isinstance(mod, IRModule):
            raise LoomTypeError(f"{path!r}: an interp module file must hold an IRModule, got {type(mod).__name__}")
        target = Target(header["target"]) if isinstance(header.get("target"), str) else None
        module = cls(mod, target, header["entry"])
        imports = header.get("imports") or []
        if imports:
            from ..backend.base import signature_of

            module._adopt_build(ModuleInfo(FORMAT, str(module.target), module.entry_name,
                                           {n: signature_of(f) for n, f in module._signatures.items()},
                                           tuple(map(str, imports))), payload)
        embedded = header.get("embedded") or ""
        if embedded:
            from .linking import link, unpack_modules

            for sub in unpack_modules(str(embedded), path):
                module.import_module(sub)
            link(module)
        return module


class InterpBackend(Backend):
    """The ``interp`` kind's stages: the IRModule's JSON text is its source and its artifact.

    Thread-bound code runs with GPU semantics, so barriers are welcome here.

    >>> from loom.ir import IRModule
    >>> from loom.backend import build_module
    >>> build_module(IRModule({}), Target("interp")).get_source("json")[:20]
    '{"loom_json":1,"root'
    """

    kind = FORMAT
    version = "1"
    cacheable = False  # "compiling" is writing JSON: nothing to save
    thread_semantics = "gpu"

    def render(self, mod: IRModule, options: BackendOptions) -> Mapping[str, str]:
        return {"json": save_json(mod)}

    def compile(self, sources: Mapping[str, str], options: BackendOptions) -> bytes:
        return sources["json"].encode("utf-8")

    def load(self, data: bytes, info: ModuleInfo) -> Module:
        return _module_from_json(InterpModule, data, info)


def _module_from_json(cls: type[InterpModule], data: bytes, info: ModuleInfo, **kwargs: Any) -> InterpModule:
    try:
        # A build's own text, or part of an export already read whole and integrity-checked: load_json's
        # size limits, meant for arbitrary text, would only refuse large kernels (an unrolled loop...).
        mod = load_json(bytes(data).decode("utf-8"), limits=False)
    except UnicodeDecodeError as err:
        raise SerializationError(f"an {info.kind} artifact is not UTF-8 JSON ({err})") from None
    if not isinstance(mod, IRModule):
        raise LoomTypeError(f"an {info.kind} artifact must hold an IRModule, got {type(mod).__name__}")
    return cls(mod, Target(info.target), info.entry or None, **kwargs)
