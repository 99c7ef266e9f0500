"""Calls between modules: linking imports, the callback bridge, and embedding imported modules.

A host module built for a device target calls its kernels, which live in the
device's module, by name (``Call(GlobalVar(name))``).  The host module lists
those names in :attr:`~loom.runtime.module.Module.imports`; :func:`link` finds
each one among the modules it imports and hands it over with
``host.link_import(name, provider)``.  What "hand over" means depends on the host:

* a native host (llvm, c) writes the address of a native-ABI function into the
  import slot its code calls through (:mod:`loom.runtime.abi`): the provider's
  compiled function, or, for a provider run by Python (the interpreter, a
  device driver), a ctypes callback into its :meth:`~loom.runtime.module.Module.call_words`;
* an interpreted host calls ``provider.call_words(name, words)`` directly.

Either way the arguments cross as native ABI words, and an exception raised by
a Python provider under a native caller travels back up intact: the callback
parks it (per thread) and returns an error status, and the outermost native
call re-raises it (:func:`take_pending_error`).

Native host code that allocates device memory calls the runtime's allocator
through two more slots, which :func:`link` fills with :func:`device_services`.

Exported libraries embed their imported modules (:func:`pack_modules`), so
:func:`~loom.runtime.load_module` restores the whole tree and links it again.
"""

from __future__ import annotations

import base64
import ctypes
import json
import threading
from typing import TYPE_CHECKING, Any, Callable, Sequence

from ..errors import LoomError, SerializationError
from ..target.devices import Device
from .abi import DEVICE_ALLOC_SIGNATURE, DEVICE_FREE_SIGNATURE, NATIVE_SIGNATURE, abi_vars

if TYPE_CHECKING:
    from .module import Module

__all__ = ["LinkError", "link", "find_provider", "words_callback", "take_pending_error", "device_services",
           "pack_modules", "unpack_modules"]


class LinkError(LoomError):
    """A module calls a function that none of the modules it imports defines."""


# --------------------------------------------------------------------------- errors across native frames

_pending = threading.local()
# Errors by the address of their message.  A callback on a thread Python did not start (an OpenMP
# worker) loses its thread-local state when it returns, so the outermost caller finds the error
# through the message its native code returned; the bytes stay alive here meanwhile.
_by_message: dict[int, tuple[BaseException, bytes]] = {}
_by_message_lock = threading.Lock()
_BY_MESSAGE_LIMIT = 64


def _park(err: BaseException, error_out: Any, text: str) -> None:
    """Remember ``err`` for the outermost native caller and give native code a message."""
    if getattr(_pending, "error", None) is None:
        _pending.error = err
    message = text.encode("utf-8", "replace")[:4000]
    _pending.message = message  # keeps the bytes alive while native code holds the pointer
    if error_out:
        error_out[0] = message
        with _by_message_lock:
            _by_message[ctypes.cast(ctypes.c_char_p(message), ctypes.c_void_p).value or 0] = (err, message)
            while len(_by_message) > _BY_MESSAGE_LIMIT:
                del _by_message[next(iter(_by_message))]


def take_pending_error(message_address: int | None = None) -> BaseException | None:
    """The exception a Python callback raised under the native call that just failed (once), else None.

    ``message_address`` is the message the native call returned: it finds an
    error parked on another thread (a parallel region's worker).
    """
    err = getattr(_pending, "error", None)
    _pending.error = None
    with _by_message_lock:
        found = _by_message.pop(message_address, None) if message_address else None
    return err if err is not None else (found[0] if found is not None else None)


# --------------------------------------------------------------------------- Python functions as native functions


def words_callback(module: Module, name: str) -> tuple[int, Any]:
    """``(address, keepalive)`` of a native-ABI function that runs ``module.call_words(name, ...)``."""
    func = module._signatures[name]
    nslots = len(abi_vars(func))
    call_words = module.call_words

    def run(args: Any, error: Any) -> int:
        try:
            call_words(name, [args[i] for i in range(nslots)])
            return 0
        except BaseException as err:  # noqa: BLE001 - nothing may unwind through native frames
            _park(err, error, f"{name}: {err}")
            return -1

    fn = NATIVE_SIGNATURE(run)
    return ctypes.cast(fn, ctypes.c_void_p).value or 0, (fn, module)


# --------------------------------------------------------------------------- device memory for native host code


def _device_alloc(device_type: int, device_id: int, nbytes: int, alignment: int, error: Any) -> int | None:
    from .device_api import get_device_api

    try:
        return get_device_api(device_type).allocate(Device(device_type, device_id), nbytes, alignment)
    except BaseException as err:  # noqa: BLE001
        _park(err, error, f"device allocation of {nbytes} bytes failed: {err}")
        return None


def _device_free(device_type: int, device_id: int, address: int | None, error: Any) -> int:
    from .device_api import get_device_api

    try:
        get_device_api(device_type).free(Device(device_type, device_id), address or 0)
        return 0
    except BaseException as err:  # noqa: BLE001
        _park(err, error, f"device free failed: {err}")
        return -1


_ALLOC = DEVICE_ALLOC_SIGNATURE(_device_alloc)
_FREE = DEVICE_FREE_SIGNATURE(_device_free)


def device_services() -> dict[str, int]:
    """The runtime's native entry points by slot symbol (``loom_rt_device_alloc``, ``loom_rt_device_free``,
    and ``loom_rt_call_packed`` of :mod:`loom.runtime.packed`)."""
    from .abi import DEVICE_ALLOC_SYMBOL, DEVICE_FREE_SYMBOL
    from .packed import packed_service

    return {DEVICE_ALLOC_SYMBOL: ctypes.cast(_ALLOC, ctypes.c_void_p).value or 0,
            DEVICE_FREE_SYMBOL: ctypes.cast(_FREE, ctypes.c_void_p).value or 0, **packed_service()}


# --------------------------------------------------------------------------- linking


def find_provider(module: Module, name: str) -> Module | None:
    """The module defining ``name`` among those ``module`` imports (breadth first), else None.

    Functions the runtime itself defines (:mod:`loom.runtime.device_copy`) come from the runtime.
    """
    from .device_copy import runtime_services

    services = runtime_services()
    if name in services.function_names:
        return services
    queue = list(module.imported_modules)
    while queue:
        sub = queue.pop(0)
        if name in sub.function_names:
            return sub
        queue.extend(sub.imported_modules)
    return None


def link(module: Module) -> Module:
    """Link ``module`` and every module it imports: each import goes to the module that defines it.

    :raises LinkError: naming the function and the modules searched.
    """
    for sub in module.imported_modules:
        link(sub)
    for name in module.imports:
        provider = find_provider(module, name)
        if provider is None:
            searched = ", ".join(f"{m.type_key} ({', '.join(m.function_names) or 'empty'})"
                                 for m in module.imported_modules) or "none"
            raise LinkError(f"the {module.type_key} module calls {name!r}, which none of the modules it imports "
                            f"defines (imported: {searched})")
        module.link_import(name, provider)
    return module


# --------------------------------------------------------------------------- embedding imported modules


def _entry(module: Module) -> dict[str, Any]:
    if module.info is None or module.artifact is None:
        raise SerializationError(f"cannot embed the imported {module.type_key} module: it was not built by a "
                                 "backend's stages, so there is no compiled artifact to store")
    return {"info": module.info.to_json(), "artifact": base64.b64encode(bytes(module.artifact)).decode("ascii"),
            "imports": [_entry(sub) for sub in module.imported_modules]}


def pack_modules(modules: Sequence[Module]) -> str:
    """The modules (and what they import) as JSON text: metadata plus compiled bytes, per module."""
    return json.dumps([_entry(m) for m in modules], sort_keys=True)


def _restore(doc: Any, where: str, load: Callable[[bytes, Any], Module]) -> Module:
    from ..backend.base import ModuleInfo

    if not isinstance(doc, dict) or not isinstance(doc.get("info"), str) or not isinstance(doc.get("artifact"), str) \
            or not isinstance(doc.get("imports"), list):
        raise SerializationError(f"{where}: an embedded module entry is malformed")
    info = ModuleInfo.from_json(doc["info"], f"{where}: embedded module")
    try:
        data = base64.b64decode(doc["artifact"].encode("ascii"), validate=True)
    except (ValueError, UnicodeEncodeError) as err:
        raise SerializationError(f"{where}: the embedded {info.kind} module's bytes are corrupt ({err})") from None
    module = load(data, info)
    for sub in doc["imports"]:
        module.import_module(_restore(sub, where, load))
    return module


def unpack_modules(text: str, where: str) -> list[Module]:
    """Rebuild what :func:`pack_modules` wrote, through each module's backend (not yet linked)."""
    from ..backend.stages import load_artifact

    try:
        docs = json.loads(text)
    except ValueError as err:
        raise SerializationError(f"{where}: the embedded modules are not valid JSON ({err})") from None
    if not isinstance(docs, list):
        raise SerializationError(f"{where}: the embedded modules must be a list")
    return [_restore(d, where, load_artifact) for d in docs]
