"""The disk cache as a whole: every namespace's entries, their size, least-recently-used pruning, clearing.

What ``loom cache info | prune | clear`` and the automatic size cap of
:meth:`~loom.runtime.disk_cache.DiskCache.fetch` run on.  An entry's time is the
newest modification time of its files: every cache hit renews it.  Entries are
removed under the lock their builds take, so a build running meanwhile is never
handed half an entry; lock files stay (a build may be waiting on one).
"""

from __future__ import annotations

import os
import stat
import time
from typing import Collection

from .disk_cache import _LOCK, _TMP, CacheEntry, CacheError, DiskCache, _ownership_problem, cache_root

__all__ = ["cache_entries", "cache_usage", "clear_cache", "folder_problem", "namespace_entries", "prune"]

_KEY_CHARS = frozenset("0123456789abcdef")
#: A temporary file this old belongs to a build that was killed (a live one renames it within seconds).
STALE_TEMPORARY_AGE = 3600.0


def namespace_entries(folder: str, namespace: str) -> list[CacheEntry]:
    """The entries in the namespace folder ``folder`` (valid or not), with their sizes and last use."""
    found: dict[str, tuple[int, float]] = {}
    try:
        listing = list(os.scandir(folder))
    except OSError:  # missing, or not a folder
        return []
    for item in listing:
        key = item.name[:64]
        if len(key) < 64 or not _KEY_CHARS.issuperset(key) or item.name.endswith(_LOCK):
            continue  # lock files, temporaries of builds in progress, foreign files
        try:
            st = item.stat(follow_symlinks=False)
        except OSError:
            continue
        size, used = found.get(key, (0, 0.0))
        found[key] = (size + st.st_size, max(used, st.st_mtime))
    return [CacheEntry(namespace, key, size, used) for key, (size, used) in found.items()]


def folder_problem(folder: str | os.PathLike[str]) -> str | None:
    """Why the cache would refuse the existing ``folder`` (not a folder, not private), else None."""
    folder = os.fspath(folder)
    try:
        st = os.stat(folder)
    except FileNotFoundError:
        return None
    except OSError as err:
        return f"{folder!r} cannot be used: {err}"
    if not stat.S_ISDIR(st.st_mode):
        return f"{folder!r} is not a folder"
    problem = _ownership_problem(st)
    return None if problem is None else f"{folder!r} {problem}: the cache refuses it"


def cache_entries(root: str | os.PathLike[str] | None = None) -> list[CacheEntry]:
    """Every entry of every namespace under ``root`` (default :func:`cache_root`)."""
    root = os.fspath(root) if root is not None else cache_root()
    try:
        namespaces = sorted(d.name for d in os.scandir(root) if d.is_dir(follow_symlinks=False))
    except OSError:
        return []
    return [e for ns in namespaces for e in namespace_entries(os.path.join(root, ns), ns)]


def cache_usage(root: str | os.PathLike[str] | None = None) -> dict[str, tuple[int, int]]:
    """``{namespace: (entries, bytes)}`` under ``root`` (default :func:`cache_root`)."""
    usage: dict[str, tuple[int, int]] = {}
    for e in cache_entries(root):
        count, size = usage.get(e.namespace, (0, 0))
        usage[e.namespace] = (count + 1, size + e.size)
    return usage


def prune(max_size: int, root: str | os.PathLike[str] | None = None,
          keep: Collection[tuple[str, str]] = ()) -> tuple[int, int]:
    """Evict the least recently used entries until the cache holds at most ``max_size`` bytes.

    Entries in ``keep`` (``(namespace, key)`` pairs) and entries another process
    is building are skipped; temporaries of killed builds are deleted.  Returns
    ``(entries removed, bytes freed)``.
    """
    root = os.fspath(root) if root is not None else cache_root()
    entries = cache_entries(root)
    total = sum(e.size for e in entries)
    removed, freed = 0, _remove_stale_temporaries(root)
    for e in sorted(entries, key=lambda e: e.last_used):
        if total <= max_size:
            break
        if (e.namespace, e.key) in keep:
            continue
        cache = DiskCache(e.namespace, root)
        try:
            with cache._locked(e.key, timeout=0):
                cache._discard(e.key)
        except CacheError:  # being built right now, or not removable: leave it
            continue
        total -= e.size
        removed += 1
        freed += e.size
    return removed, freed


def clear_cache(root: str | os.PathLike[str] | None = None) -> tuple[int, int]:
    """Delete every entry of every namespace (each under its lock), and the temporaries of killed builds;
    ``(entries removed, bytes freed)``."""
    root = os.fspath(root) if root is not None else cache_root()
    removed = freed = 0
    for e in cache_entries(root):
        cache = DiskCache(e.namespace, root)
        with cache._locked(e.key):
            cache._discard(e.key)
        removed += 1
        freed += e.size
    return removed, freed + _remove_stale_temporaries(root)


def _remove_stale_temporaries(root: str) -> int:
    """Delete the temporaries of builds that were killed (older than :data:`STALE_TEMPORARY_AGE`); bytes freed."""
    freed, now = 0, time.time()
    try:
        namespaces = [d.path for d in os.scandir(root) if d.is_dir(follow_symlinks=False)]
    except OSError:
        return 0
    for folder in namespaces:
        try:
            listing = list(os.scandir(folder))
        except OSError:
            continue
        for item in listing:
            if not item.name.startswith(_TMP) or item.name.endswith(_LOCK):
                continue
            try:
                st = item.stat(follow_symlinks=False)
                if now - st.st_mtime > STALE_TEMPORARY_AGE and stat.S_ISREG(st.st_mode):
                    os.unlink(item.path)
                    freed += st.st_size
            except OSError:
                continue
    return freed
