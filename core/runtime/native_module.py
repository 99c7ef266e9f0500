"""What every module of native code shares: symbols, import slots, runtime services, the thread knob.

:class:`NativeModule` is the base of the llvm and c modules and of
:class:`~loom.runtime.native_library.LibraryModule`.  A subclass says how to find
the address of a symbol (:meth:`NativeModule._symbol_address`); the base then

* calls each function through the native ABI (:func:`~loom.runtime.abi.native_runner`,
  with the per-call fast path);
* hands its functions to other modules as plain addresses (:meth:`native_function`)
  and runs calls from them (:meth:`call_words`);
* links the functions it imports by writing their addresses into its import
  slots (:meth:`link_import`), and points the device-memory slots at the runtime
  (:func:`~loom.runtime.linking.device_services`);
* binds its ``loom_num_threads`` knob (:func:`~loom.runtime.native_library.bind_thread_knob`).
"""

from __future__ import annotations

import ctypes
from typing import Any, Mapping, Sequence

from ..errors import LoomError
from ..ir.function import PrimFunc
from .abi import NATIVE_ALIGNMENT, NATIVE_SIGNATURE, NativeRunner, import_symbol, native_runner
from .linking import LinkError, device_services
from .module import Module, Runner

__all__ = ["NativeModule"]


class NativeModule(Module):
    """Base of modules whose functions are native code (see the module docstring).

    :param functions: the signatures of the functions, by name.
    :param symbols: the C symbol of each function (default: its name).
    :param thread_default: the thread count of parallel regions when ``LOOM_NUM_THREADS`` is unset.
    """

    assumed_alignment = NATIVE_ALIGNMENT

    def __init__(self, functions: Mapping[str, PrimFunc], entry_name: str | None = None,
                 symbols: Mapping[str, str] | None = None, thread_default: int = 0) -> None:
        super().__init__(functions, entry_name)
        self._symbols = dict(symbols or {})
        self._links: dict[str, Any] = {}
        self._word_runners: dict[str, NativeRunner] = {}
        from .native_library import THREADS_SYMBOL, bind_thread_knob

        knob = self._symbol_address(THREADS_SYMBOL)
        if knob:
            bind_thread_knob(self, knob, thread_default)
        for symbol, address in device_services().items():
            slot = self._symbol_address(symbol)
            if slot:
                ctypes.c_void_p.from_address(slot).value = address

    # -- the one thing subclasses provide -------------------------------------------
    def _symbol_address(self, symbol: str) -> int | None:
        """The address of a function or global named ``symbol``, or None when there is none."""
        raise NotImplementedError

    # -- functions ------------------------------------------------------------------
    def symbol_of(self, name: str) -> str:
        """The C symbol of function ``name``."""
        return self._symbols.get(name) or str(self._signatures[name].attrs.get("global_symbol", name))

    def _function_address(self, name: str) -> int:
        address = self._symbol_address(self.symbol_of(name))
        if not address:
            raise LoomError(f"the {self.type_key} module has no compiled function {self.symbol_of(name)!r} "
                            f"for {name!r}")
        return address

    def _make_runner(self, name: str, func: PrimFunc) -> Runner:
        # The PackedFunc holding this runner references the module, which owns the code.
        return native_runner(NATIVE_SIGNATURE(self._function_address(name)), func, name)

    def native_function(self, name: str) -> tuple[int, Any]:
        return self._function_address(name), self

    def call_words(self, name: str, words: Sequence[int]) -> None:
        runner = self._word_runners.get(name)
        if runner is None:
            runner = self._word_runners[name] = native_runner(
                NATIVE_SIGNATURE(self._function_address(name)), self._signatures[name], name)
        runner.invoke(list(words))

    def link_import(self, name: str, provider: Module) -> None:
        slot = self._symbol_address(import_symbol(name))
        if not slot:
            raise LinkError(f"the {self.type_key} module has no import slot for {name!r} "
                            f"({import_symbol(name)}); it does not call that function")
        address, keepalive = provider.native_function(name)
        ctypes.c_void_p.from_address(slot).value = address
        self._links[name] = keepalive
