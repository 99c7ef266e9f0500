"""The on-disk cache of ``@loom.jit`` kernels: compiled modules shared by every process of the user.

An entry is a :class:`~loom.runtime.disk_cache.DiskCache` artifact (namespace
``jit``: a ``0700`` folder, atomic writes, a record with the size and sha256 of
the bytes, one file lock per key so that concurrent processes compile once)
holding two sections: ``meta``, JSON that says which kernel and which key it
is, and ``modules``, the built module tree as :func:`~loom.runtime.linking.pack_modules`
writes it (each module's :class:`~loom.backend.ModuleInfo` as JSON plus the
backend's compiled bytes).  Nothing is pickled.

A hit loads the bytes through each module's backend (no lowering, no compile).
An entry that is damaged (the DiskCache record does not match), foreign (not
owned by the user) or that cannot be loaded is a miss: a warning on the
``loom.cache`` logger, and the entry is compiled again and replaced.
"""

from __future__ import annotations

import json
import logging
import threading
from typing import Any, Callable, Optional

from ..errors import LoomError
from ..backend.base import pack_sections, unpack_sections
from ..runtime.disk_cache import CacheError, DiskCache

__all__ = ["JIT_FORMAT", "NAMESPACE", "fetch_module", "backend_identity"]

log = logging.getLogger("loom.cache")

#: Version of the entry layout; part of every key.
JIT_FORMAT = 1
#: The DiskCache namespace of JIT kernels.
NAMESPACE = "jit"

_identities: dict[str, str] = {}
_identities_lock = threading.Lock()
_warned: set[str] = set()


def backend_identity(target: Any) -> str:
    """The versions and compiler identities of the backends building ``target`` (and its host)."""
    text = str(target)
    found = _identities.get(text)
    if found is not None:
        return found
    from ..backend import get_backend

    parts = []
    for t in (target.without_host(), target.host):
        if t is None:
            continue
        backend, plugin = get_backend(t.kind.name)
        parts.append(f"{t.kind.name}:{plugin}:{backend.version}:{backend.compiler_identity(backend.options(t))}")
    found = "|".join(parts)
    with _identities_lock:
        _identities[text] = found
    return found


def _pack(module: Any, meta: dict[str, Any]) -> bytes:
    from ..runtime.linking import pack_modules

    return pack_sections({"meta": json.dumps({"loom_jit": JIT_FORMAT, **meta}, sort_keys=True),
                          "modules": pack_modules([module])})


def _unpack(data: bytes, where: str) -> Any:
    from ..errors import SerializationError
    from ..runtime.linking import link, unpack_modules

    sections = unpack_sections(data, where)
    try:
        meta = json.loads(sections["meta"].decode("utf-8"))
    except (KeyError, ValueError, UnicodeDecodeError):
        meta = None
    if not isinstance(meta, dict) or meta.get("loom_jit") != JIT_FORMAT or "modules" not in sections:
        raise SerializationError(f"{where}: not a loom.jit cache entry of format {JIT_FORMAT}")
    modules = unpack_modules(sections["modules"].decode("utf-8"), where)
    if len(modules) != 1:
        raise SerializationError(f"{where}: expected one module tree, found {len(modules)}")
    return link(modules[0])


def _warn_once(message: str) -> None:
    (log.debug if message in _warned else log.warning)("%s", message)
    _warned.add(message)


def fetch_module(key_parts: Optional[list[str]], build: Callable[[], Any],
                 meta: dict[str, Any]) -> tuple[Any, bool]:
    """``(module, loaded_from_disk)``: the cached module of ``key_parts``, else ``build()``'s, stored.

    ``key_parts`` None (a key that cannot be written as stable text), or the cache
    turned off (``LOOM_CACHE=0``), means build without the disk.
    """
    cache = DiskCache.default(NAMESPACE) if key_parts is not None else None
    if cache is None:
        return build(), False
    built: list[Any] = []

    def write(path: str) -> None:
        built.append(build())
        with open(path, "wb") as fh:
            fh.write(_pack(built[-1], meta))

    for attempt in range(2):
        try:
            data, path = cache.fetch(key_parts, write)  # type: ignore[arg-type]  # checked above
        except CacheError as err:
            _warn_once(f"{err}; compiling loom.jit kernels without the disk cache")
            return (built[-1] if built else build()), False
        if built:
            return built[-1], False
        try:
            return _unpack(data, path), True
        except Exception as err:  # noqa: BLE001 - any entry that cannot be loaded is a miss
            log.warning("loom.jit cache entry %s cannot be loaded (%s: %s): compiling it again", path,
                        type(err).__name__, err)
            try:
                cache.discard(key_parts)  # type: ignore[arg-type]
            except LoomError as discard_err:
                _warn_once(f"{discard_err}; compiling without the disk cache")
                return build(), False
    return build(), False
