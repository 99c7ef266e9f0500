"""The ``interp`` target's runtime Module: lowered programs run on the reference interpreter.

``loom.build(..., target="interp")`` returns an :class:`InterpModule`.  It needs
no compiler or device, checks arguments exactly as compiled backends do (the
shared :class:`~loom.runtime.arguments.ArgumentChecker`), and then runs the
function with :class:`loom.testing.Interpreter`, which adds bounds checks on
every access, so it is the oracle every backend is compared with.  A failing
``AssertStmt`` raises :class:`loom.testing.AssertionFailed` at call time.

Functions of the module may call each other (a host function launching the
``<name>_kernel<k>`` device functions of SplitHostDevice through a ``Call`` of a
``GlobalVar``); thread-bound regions run as sequential loops.

Exported files carry the IRModule as ``loom.save_json`` text.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..errors import LoomTypeError, LoomValueError, SerializationError
from ..ir.function import IRModule, PrimFunc
from ..ir.serialize import load_json, save_json
from ..target.target import Target
from .module import Module, Runner, lowered_functions, read_export

if TYPE_CHECKING:
    from ..testing.interpreter import Interpreter

__all__ = ["InterpModule", "FORMAT"]

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

    def __init__(self, mod: IRModule, target: Target | None = None, entry_name: str | None = None) -> None:
        prims = lowered_functions(mod, "InterpModule")
        self.ir_module = mod
        self.target = target if target is not None else mod.attrs.get("target", None) or Target("interp")
        self._interpreters: dict[str, Interpreter] = {}
        super().__init__(prims, entry_name)
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

            found = self._interpreters[name] = Interpreter(self.ir_module, name)
        return found

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
        return {"target": str(self.target)}

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
        return cls(mod, target, header["entry"])
