"""An on-disk cache of build artifacts, safe under concurrent processes.

Backends cache what is slow to rebuild (a compiled shared library, a cubin) in
a :class:`DiskCache`.  An entry is one file named by the sha256 of its *key
material* (source, flags, compiler version...), next to a small metadata record
holding the artifact's length and sha256:

* writes are atomic: the artifact is built into a temporary file of the cache
  folder and ``os.replace``-d into place, then its record is written the same way;
* a missing, truncated, corrupted or foreign entry fails the integrity check and
  is a *miss*: it is deleted and rebuilt, never loaded and never an error;
* one :class:`filelock.FileLock` per key: two processes that miss the same key
  build it once; the second waits, then hits.

The folder is ``$LOOM_CACHE_DIR/<namespace>``, by default
``platformdirs.user_cache_dir("loom")/<namespace>``; ``LOOM_CACHE=0`` turns
caching off (:meth:`DiskCache.default` then returns None).

>>> import os, tempfile
>>> cache = DiskCache("doc", root=tempfile.mkdtemp())
>>> def build(path):
...     with open(path, "w") as fh:
...         fh.write("artifact")
>>> path = cache.get_or_create(["source", "-O2"], build)
>>> open(path).read(), cache.lookup(["source", "-O2"]) == path, cache.lookup(["source", "-O3"])
('artifact', True, None)
"""

from __future__ import annotations

import contextlib
import glob
import hashlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator

from .. import envvars
from ..errors import LoomError

__all__ = ["CacheError", "DiskCache", "cache_enabled", "cache_key", "cache_root",
           "ENV_CACHE", "ENV_CACHE_DIR", "CACHE_VERSION"]

#: The cache's root folder (its namespaces are subfolders).
ENV_CACHE_DIR = "LOOM_CACHE_DIR"
#: ``0``/``false``/``off``/``no`` turns every on-disk cache off.
ENV_CACHE = "LOOM_CACHE"
#: Part of every key and record: bumping it orphans every existing entry.
CACHE_VERSION = 1

_OFF = {"0", "false", "off", "no"}
_META = ".meta"
_LOCK = ".lock"
_TMP = ".tmp-"
_MAX_META = 4096
_CHUNK = 1 << 20


class CacheError(LoomError):
    """The cache folder cannot be used (not creatable or not writable, or a lock wait timed out)."""


def cache_enabled() -> bool:
    """Whether on-disk caching is on: ``LOOM_CACHE`` is unset or not one of 0/false/off/no."""
    return envvars.CACHE.get()


def cache_root() -> str:
    """``$LOOM_CACHE_DIR``, else the user cache folder of ``loom`` (platformdirs)."""
    found = envvars.CACHE_DIR.get()
    if found:
        return found
    import platformdirs  # imported on use: it costs a noticeable part of a cached build

    return platformdirs.user_cache_dir("loom")


def cache_key(parts: Iterable[str | bytes]) -> str:
    """The sha256 hex digest of ``parts``; each is length-prefixed, so ``["ab", "c"]`` != ``["a", "bc"]``.

    >>> cache_key(["ab", "c"]) == cache_key(["a", "bc"])
    False
    """
    h = hashlib.sha256(f"loom-cache-{CACHE_VERSION}".encode())
    for part in parts:
        data = part.encode("utf-8") if isinstance(part, str) else bytes(part)
        h.update(len(data).to_bytes(8, "little"))
        h.update(data)
    return h.hexdigest()


def _file_digest(path: str) -> tuple[int, str]:
    h, size = hashlib.sha256(), 0
    with open(path, "rb") as fh:
        while chunk := fh.read(_CHUNK):
            size += len(chunk)
            h.update(chunk)
    return size, h.hexdigest()


def _remove(path: str) -> None:
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)


class DiskCache:
    """Artifacts in ``<root>/<namespace>``, keyed by the sha256 of their key material.

    :param namespace: the subfolder (one per backend and artifact kind, e.g. ``"c"``).
    :param root: the root folder (default :func:`cache_root`, read now).
    :param suffix: the file extension of artifacts (``".so"``: some loaders care).
    :param lock_timeout: seconds to wait for another process building the same
        key before giving up with :class:`CacheError`.
    """

    def __init__(self, namespace: str, root: str | os.PathLike[str] | None = None, *, suffix: str = "",
                 lock_timeout: float = 600.0) -> None:
        if not namespace or namespace in (".", "..") or any(c in namespace for c in "/\\\0"):
            raise CacheError(f"a cache namespace is one folder name, got {namespace!r}")
        if any(c in suffix for c in "/\\\0"):
            raise CacheError(f"a cache suffix is a file extension like '.so', got {suffix!r}")
        self.folder = os.path.join(os.fspath(root) if root is not None else cache_root(), namespace)
        self.suffix = suffix
        self.lock_timeout = lock_timeout

    @classmethod
    def default(cls, namespace: str, *, suffix: str = "") -> DiskCache | None:
        """The cache of ``namespace`` under :func:`cache_root`, or None when ``LOOM_CACHE`` turns caching off."""
        return cls(namespace, suffix=suffix) if cache_enabled() else None

    def __repr__(self) -> str:
        return f"DiskCache({self.folder!r}, suffix={self.suffix!r})"

    # -- entries ---------------------------------------------------------------

    def path_of(self, key: str) -> str:
        """The artifact path of ``key`` (a :func:`cache_key` digest); the file may not exist."""
        return os.path.join(self.folder, key + self.suffix)

    def lookup(self, key_parts: Iterable[str | bytes]) -> str | None:
        """The path of the valid entry of ``key_parts``, else None (nothing is written)."""
        key = cache_key(key_parts)
        return self.path_of(key) if self._valid(key) else None

    def get_or_create(self, key_parts: Iterable[str | bytes], build: Callable[[str], None]) -> str:
        """The path of the entry of ``key_parts``, built first on a miss.

        :param build: writes the artifact to the path it is given (a fresh
            temporary file in the cache folder); an exception from it propagates
            and leaves the cache unchanged.
        :raises CacheError: when the folder cannot be created or written.
        """
        key = cache_key(key_parts)
        if self._valid(key):  # the common case needs no lock
            return self.path_of(key)
        self._make_folder()
        with self._locked(key):
            if not self._valid(key):  # a concurrent builder may have finished while we waited
                self._discard(key)
                self._build(key, build)
        return self.path_of(key)

    def clear(self) -> int:
        """Delete every entry (each under its lock); the number deleted."""
        count = 0
        for meta in glob.glob(os.path.join(glob.escape(self.folder), "*" + _META)):
            key = os.path.basename(meta)[:-len(_META)]
            with self._locked(key):
                count += os.path.exists(self.path_of(key))
                self._discard(key)
        return count

    # -- internals ---------------------------------------------------------------

    def _meta_path(self, key: str) -> str:
        return os.path.join(self.folder, key + _META)

    def _valid(self, key: str) -> bool:
        """Whether the entry exists and matches its record (key, format, length, sha256)."""
        try:
            with open(self._meta_path(key), "rb") as fh:
                meta = json.loads(fh.read(_MAX_META).decode("utf-8"))
            if not isinstance(meta, dict) or meta.get("loom_cache") != CACHE_VERSION or meta.get("key") != key:
                return False
            path = self.path_of(key)
            if os.path.getsize(path) != meta.get("size"):  # cheap check before hashing
                return False
            return _file_digest(path) == (meta.get("size"), meta.get("sha256"))
        except (OSError, ValueError):  # missing, unreadable, not JSON, not UTF-8
            return False

    def _discard(self, key: str) -> None:
        """Remove an entry that failed the check, and temporaries of interrupted builds (lock held)."""
        _remove(self._meta_path(key))  # the record first: lock-free readers then see a miss
        _remove(self.path_of(key))
        for stale in glob.glob(os.path.join(glob.escape(self.folder), f"{_TMP}{key[:16]}-*")):
            _remove(stale)

    def _build(self, key: str, build: Callable[[str], None]) -> None:
        tmp = self._temp(key, self.suffix)
        try:
            build(tmp)
            size, digest = self._commit(tmp, self.path_of(key), lambda: _file_digest(tmp))
        finally:
            _remove(tmp)
        record = json.dumps({"loom_cache": CACHE_VERSION, "key": key, "size": size, "sha256": digest}).encode()
        meta = self._temp(key, _META)
        try:
            self._commit(meta, self._meta_path(key), lambda: Path(meta).write_bytes(record))
        finally:
            _remove(meta)

    def _commit(self, tmp: str, dest: str, prepare: Callable[[], Any]) -> Any:
        """Run ``prepare`` on the finished temp file, flush it to disk and rename it to ``dest``."""
        try:
            result = prepare()
            with open(tmp, "rb+") as fh:
                os.fsync(fh.fileno())
            os.replace(tmp, dest)
        except OSError as err:
            raise CacheError(f"cannot store a cache entry in {self.folder!r}: {err}") from None
        return result

    def _temp(self, key: str, suffix: str) -> str:
        try:
            fd, path = tempfile.mkstemp(prefix=f"{_TMP}{key[:16]}-", suffix=suffix, dir=self.folder)
        except OSError as err:
            raise CacheError(f"cannot write to the cache folder {self.folder!r}: {err}; set {ENV_CACHE_DIR} "
                             f"to a writable folder or {ENV_CACHE}=0") from None
        os.close(fd)
        return path

    def _make_folder(self) -> None:
        try:
            os.makedirs(self.folder, exist_ok=True)
        except OSError as err:
            raise CacheError(f"cannot create the cache folder {self.folder!r}: {err}; set {ENV_CACHE_DIR} "
                             f"to a writable folder or {ENV_CACHE}=0") from None

    @contextlib.contextmanager
    def _locked(self, key: str) -> Iterator[None]:
        import filelock  # imported on use: a cache hit takes no lock

        lock = filelock.FileLock(os.path.join(self.folder, key + _LOCK), timeout=self.lock_timeout)
        try:
            lock.acquire()
        except filelock.Timeout:
            raise CacheError(f"waited {self.lock_timeout:g} s for another process building cache entry {key} "
                             f"in {self.folder!r}; if none is running, delete {lock.lock_file!r}") from None
        except OSError as err:
            raise CacheError(f"cannot lock cache entry {key} in {self.folder!r}: {err}") from None
        try:
            yield
        finally:
            lock.release()
