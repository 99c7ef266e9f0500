"""An on-disk cache of build artifacts, private to the user and safe under concurrent processes.

Backends cache what is slow to rebuild (a compiled shared library, a cubin) in
a :class:`DiskCache`.  An entry is one file named by the sha256 of its *key
material* (source, flags, compiler version...), next to a small metadata record
holding the artifact's length and sha256:

* writes are atomic: the artifact is built into a temporary file of the cache
  folder and ``os.replace``-d into place (a new file: a reader that has the old
  one keeps it), then its record is written the same way;
* reads return the *bytes* that passed the check (:meth:`DiskCache.fetch`), never
  a file to open again later, which another process could change meanwhile;
* only regular files owned by the user and not writable by group or others are
  read (never through a symbolic link, never blocking on a FIFO); anything else
  (missing, truncated, corrupted, foreign, a folder in the way) is a *miss*: it
  is deleted and rebuilt, never loaded and never an error (damage is logged as
  a warning on the ``loom.cache`` logger);
* one lock per key (an exclusive ``flock`` of a lock file, as :class:`filelock.FileLock`
  takes it on POSIX; filelock itself elsewhere): two processes that miss the same key
  build it once; the second waits, then hits.

**Security.**  Whoever can write into the cache can make this process run their
code, so the folders are created ``0700`` and a cache folder (the root or a
namespace) that belongs to another user or is writable by group or others is
refused with a :class:`CacheError` (the backend stages then compile without the
cache, with a warning).

**Size.**  The cache as a whole is capped at ``LOOM_CACHE_MAX_SIZE`` (default
2 GiB): after each new entry the least recently used entries (every hit renews
an entry's time) are evicted until it fits.  :func:`cache_usage`, :func:`prune`
and :func:`clear_cache` (from :mod:`loom.runtime.cache_admin`) serve
``loom cache info | prune | clear``.

The folder is ``$LOOM_CACHE_DIR/<namespace>``, by default
``platformdirs.user_cache_dir("loom")/<namespace>``; ``LOOM_CACHE=0`` turns
caching off (:meth:`DiskCache.default` then returns None).

>>> import os, tempfile
>>> cache = DiskCache("doc", root=tempfile.mkdtemp())
>>> def build(path):
...     with open(path, "w") as fh:
...         fh.write("artifact")
>>> data, path = cache.fetch(["source", "-O2"], build)
>>> data, open(path).read(), cache.lookup(["source", "-O2"]) == path, cache.lookup(["source", "-O3"])
(b'artifact', 'artifact', True, None)
"""

from __future__ import annotations

import contextlib
import errno
import glob
import hashlib
import json
import logging
import os
import shutil
import stat
import tempfile
import time
from typing import Callable, Iterable, Iterator, NamedTuple

from .. import envvars
from ..errors import LoomError
from .safe_files import NotARegularFile, open_regular, read_fd, read_regular_file

try:
    import fcntl
except ImportError:  # Windows: filelock's lock
    fcntl = None  # type: ignore[assignment]

__all__ = ["CacheError", "CacheEntry", "DiskCache", "cache_enabled", "cache_entries", "cache_key", "cache_max_size",
           "cache_root", "cache_usage", "clear_cache", "folder_problem", "prune", "ENV_CACHE", "ENV_CACHE_DIR",
           "CACHE_VERSION"]

log = logging.getLogger("loom.cache")

#: The cache's root folder (its namespaces are subfolders).
ENV_CACHE_DIR = "LOOM_CACHE_DIR"
#: ``0``/``false``/``off``/``no`` turns every on-disk cache off.
ENV_CACHE = "LOOM_CACHE"
#: Part of every key and record: bumping it orphans every existing entry.
CACHE_VERSION = 1

_META = ".meta"
_LOCK = ".lock"
_TMP = ".tmp-"
_MAX_META = 4096
_ADVICE = f"set {ENV_CACHE_DIR} to a private folder of yours or {ENV_CACHE}=0"


class CacheError(LoomError):
    """The cache folder cannot be used (not creatable, not writable, not private), or a lock wait timed out."""


class _Damaged(Exception):
    """An entry's file exists but must not be used (internal: the reason is logged, the entry rebuilt)."""


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


def cache_max_size() -> int:
    """The cache's size cap in bytes: ``LOOM_CACHE_MAX_SIZE`` (e.g. ``500M``), default 2 GiB."""
    return envvars.CACHE_MAX_SIZE.get()


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


def _ownership_problem(st: os.stat_result) -> str | None:
    """Why a file or folder with status ``st`` cannot be trusted, else None."""
    if not hasattr(os, "geteuid"):  # no owners or modes to check (Windows)
        return None
    uid = os.geteuid()
    if st.st_uid != uid:
        return f"belongs to user {st.st_uid}, not to this user ({uid})"
    if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        return f"is writable by group or others (mode {stat.S_IMODE(st.st_mode):04o})"
    return None


def _remove(path: str) -> None:
    """Remove whatever is at ``path`` (a folder too), never following a symbolic link."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return
    if stat.S_ISDIR(st.st_mode):
        shutil.rmtree(path)
    else:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)


class CacheEntry(NamedTuple):
    """One entry as :func:`cache_entries` sees it: bytes on disk and when it was last used (a timestamp)."""

    namespace: str
    key: str
    size: int
    last_used: float


class DiskCache:
    """Artifacts in ``<root>/<namespace>``, keyed by the sha256 of their key material.

    :param namespace: the subfolder (one per backend and artifact kind, e.g. ``"backend-c"``).
    :param root: the root folder (default :func:`cache_root`, read now).
    :param suffix: the file extension of artifacts (``".so"``: some tools care).
    :param lock_timeout: seconds to wait for another process building the same
        key before giving up with :class:`CacheError`.
    """

    def __init__(self, namespace: str, root: str | os.PathLike[str] | None = None, *, suffix: str = "",
                 lock_timeout: float = 600.0) -> None:
        if not namespace or namespace in (".", "..") or any(c in namespace for c in "/\\\0"):
            raise CacheError(f"a cache namespace is one folder name, got {namespace!r}")
        if any(c in suffix for c in "/\\\0") or suffix in (_META, _LOCK):
            raise CacheError(f"a cache suffix is a file extension like '.so', got {suffix!r}")
        self.root = os.fspath(root) if root is not None else cache_root()
        self.namespace = namespace
        self.folder = os.path.join(self.root, namespace)
        self.suffix = suffix
        self.lock_timeout = lock_timeout

    @classmethod
    def default(cls, namespace: str, *, suffix: str = "") -> DiskCache | None:
        """The cache of ``namespace`` under :func:`cache_root`, or None when ``LOOM_CACHE`` turns caching off.

        A malformed ``LOOM_CACHE_MAX_SIZE`` raises here, so that every build fails alike, hit or miss.
        """
        if not cache_enabled():
            return None
        cache_max_size()
        return cls(namespace, suffix=suffix)

    def __repr__(self) -> str:
        return f"DiskCache({self.folder!r}, suffix={self.suffix!r})"

    # -- entries ---------------------------------------------------------------

    def path_of(self, key: str) -> str:
        """The artifact path of ``key`` (a :func:`cache_key` digest); the file may not exist."""
        return os.path.join(self.folder, key + self.suffix)

    def lookup(self, key_parts: Iterable[str | bytes]) -> str | None:
        """The path of the valid entry of ``key_parts``, else None (nothing is written).

        :raises CacheError: when the cache folder is not private to this user.
        """
        key = cache_key(key_parts)
        if not self._ready(create=False):
            return None
        return self.path_of(key) if self._read(key) is not None else None

    def get(self, key_parts: Iterable[str | bytes]) -> tuple[bytes, str] | None:
        """The checked bytes and path of the entry of ``key_parts`` (its use recorded), else None; builds
        nothing, takes no lock.  :raises CacheError: when the cache folder is not private to this user."""
        return self.get_key(cache_key(key_parts))

    def get_key(self, key: str) -> tuple[bytes, str] | None:
        """:meth:`get` by the entry's :func:`cache_key` digest (an entry referring to another holds it)."""
        if len(key) != 64 or not set(key) <= set("0123456789abcdef"):
            raise CacheError(f"{key!r} is not a cache key (64 hex digits)")
        data = self._read(key) if self._ready(create=False) else None
        if data is not None:
            self._touch(key)
        return None if data is None else (data, self.path_of(key))

    def fetch(self, key_parts: Iterable[str | bytes], build: Callable[[str], None]) -> tuple[bytes, str]:
        """The checked bytes of the entry of ``key_parts`` and its path, built first on a miss.

        :param build: writes the artifact to the path it is given (a fresh
            temporary file in the cache folder); an exception from it propagates
            and leaves the cache unchanged.
        :raises CacheError: when the folder cannot be created or written, or is not private to this user.

        A new entry may evict the least recently used ones (:func:`cache_max_size`).
        """
        key = cache_key(key_parts)
        self._ready(create=True)
        found = self._read(key)  # the common case needs no lock
        if found is None:
            cap = cache_max_size()  # read first: a malformed value fails before the build
            with self._locked(key):
                found = self._read(key, warn=False)  # a concurrent builder may have finished meanwhile
                if found is None:
                    self._discard(key)
                    data = self._build(key, build)
            if found is None:
                try:
                    prune(cap, self.root, keep={(self.namespace, key)})
                except (OSError, LoomError) as err:  # eviction is housekeeping: never fail the build
                    log.warning("cannot evict old cache entries from %r: %s", self.root, err)
                return data, self.path_of(key)
        self._touch(key)
        return found, self.path_of(key)

    def get_or_create(self, key_parts: Iterable[str | bytes], build: Callable[[str], None]) -> str:
        """The path of the entry of ``key_parts`` (see :meth:`fetch`, which also returns its checked bytes)."""
        return self.fetch(key_parts, build)[1]

    def discard(self, key_parts: Iterable[str | bytes]) -> None:
        """Delete the entry of ``key_parts`` (under its lock), e.g. one whose content cannot be used."""
        key = cache_key(key_parts)
        if not self._ready(create=False):
            return
        with self._locked(key):
            self._discard(key)

    def entries(self) -> list[CacheEntry]:
        """The entries of this namespace (valid or not), with their sizes and last use."""
        from .cache_admin import namespace_entries

        return namespace_entries(self.folder, self.namespace)

    def clear(self) -> int:
        """Delete every entry (each under its lock); the number deleted."""
        count = 0
        for entry in self.entries():
            with self._locked(entry.key):
                self._discard(entry.key)
            count += 1
        return count

    # -- internals ---------------------------------------------------------------

    def _meta_path(self, key: str) -> str:
        return os.path.join(self.folder, key + _META)

    def _ready(self, create: bool) -> bool:
        """Whether the folder exists (made ``0700`` when ``create``); a CacheError when it is not private."""
        for folder in (self.root, self.folder):
            try:
                st = os.stat(folder)
            except FileNotFoundError:
                if not create:
                    return False
                try:
                    os.makedirs(folder, mode=0o700, exist_ok=True)
                    st = os.stat(folder)
                except OSError as err:
                    raise CacheError(f"cannot create the cache folder {self.folder!r}: {err}; {_ADVICE}") from None
            except OSError as err:  # e.g. a file on the way
                if not create:
                    return False
                raise CacheError(f"cannot create the cache folder {self.folder!r}: {err}; {_ADVICE}") from None
            if not stat.S_ISDIR(st.st_mode):
                if not create:
                    return False
                raise CacheError(f"cannot create the cache folder {self.folder!r}: {folder!r} is not a folder; "
                                 f"{_ADVICE}")
            problem = _ownership_problem(st)
            if problem is not None:
                raise CacheError(f"refusing the cache folder {folder!r}: it {problem}, so another user could plant "
                                 f"code that this process would run; make it private (chmod 700) or {_ADVICE}")
        return True

    def _read(self, key: str, warn: bool = True) -> bytes | None:
        """The artifact's bytes when the entry exists and matches its record, else None (damage is logged)."""
        try:
            raw = self._read_file(self._meta_path(key), _MAX_META)
            if raw is None:
                return None
            try:
                meta = json.loads(raw.decode("utf-8"))
            except ValueError:  # not JSON, not UTF-8
                raise _Damaged("its record is not JSON") from None
            if not isinstance(meta, dict) or meta.get("loom_cache") != CACHE_VERSION or meta.get("key") != key \
                    or not isinstance(meta.get("size"), int) or not isinstance(meta.get("sha256"), str):
                raise _Damaged("its record is malformed, of another version or of another entry")
            data = self._read_file(self.path_of(key), meta["size"])
            if data is None:
                raise _Damaged("its artifact is missing")
            if len(data) != meta["size"] or hashlib.sha256(data).hexdigest() != meta["sha256"]:
                raise _Damaged("its artifact does not match the size and sha256 of its record")
            return data
        except _Damaged as why:
            (log.warning if warn else log.debug)("cache entry %s in %r is damaged (%s): rebuilding it", key,
                                                 self.folder, why)
            return None

    @staticmethod
    def _read_file(path: str, limit: int) -> bytes | None:
        """The content of ``path`` (None when missing): a regular file of ours, at most ``limit`` bytes."""
        try:
            fd, st = open_regular(path, follow_symlinks=False)
        except FileNotFoundError:
            return None
        except (OSError, NotARegularFile) as err:
            raise _Damaged(str(err)) from None
        try:
            problem = _ownership_problem(st)
            if problem is not None:
                raise _Damaged(f"{path!r} {problem}")
            if st.st_size > limit:
                raise _Damaged(f"{path!r} is larger than its record says")
            return read_fd(fd, st.st_size)
        except OSError as err:
            raise _Damaged(str(err)) from None
        finally:
            os.close(fd)

    def _touch(self, key: str) -> None:
        """Record a use of the entry (its time orders eviction)."""
        with contextlib.suppress(OSError):
            os.utime(self.path_of(key))

    def _discard(self, key: str) -> None:
        """Remove an entry (whatever its suffix) and temporaries of interrupted builds; its lock is held."""
        folder = glob.escape(self.folder)
        try:
            _remove(self._meta_path(key))  # the record first: lock-free readers then see a miss
            _remove(self.path_of(key))
            for stale in (*glob.glob(os.path.join(folder, key + "*")),
                          *glob.glob(os.path.join(folder, f"{_TMP}{key[:16]}-*"))):
                if not stale.endswith(_LOCK):  # the lock stays: others may be waiting on it
                    _remove(stale)
        except OSError as err:
            raise CacheError(f"cannot remove the damaged cache entry {key} in {self.folder!r}: {err}") from None

    def _build(self, key: str, build: Callable[[str], None]) -> bytes:
        tmp = self._temp(key, self.suffix)
        try:
            build(tmp)
            try:
                data = read_regular_file(tmp, follow_symlinks=False)  # what the builder wrote, however it wrote it
            except (OSError, LoomError) as err:
                raise CacheError(f"the built cache entry {key} cannot be read back: {err}") from None
            self._commit(tmp, self.path_of(key))
        finally:
            self._drop(tmp)
        record = json.dumps({"loom_cache": CACHE_VERSION, "key": key, "size": len(data),
                             "sha256": hashlib.sha256(data).hexdigest()}).encode()
        meta = self._temp(key, _META)
        try:
            try:
                with open(meta, "wb") as fh:
                    fh.write(record)
            except OSError as err:
                raise CacheError(f"cannot store a cache entry in {self.folder!r}: {err}") from None
            self._commit(meta, self._meta_path(key))
        finally:
            self._drop(meta)
        return data

    def _commit(self, tmp: str, dest: str) -> None:
        """Make the finished temp file private and rename it to ``dest`` (a new inode).  No fsync (milliseconds
        a build): after a crash, a torn file fails the size and sha256 check of every read and is rebuilt."""
        try:
            os.chmod(tmp, 0o600)
            os.replace(tmp, dest)
        except OSError as err:
            raise CacheError(f"cannot store a cache entry in {self.folder!r}: {err}") from None

    @staticmethod
    def _drop(path: str) -> None:
        with contextlib.suppress(OSError):
            _remove(path)

    def _temp(self, key: str, suffix: str) -> str:
        try:
            fd, path = tempfile.mkstemp(prefix=f"{_TMP}{key[:16]}-", suffix=suffix, dir=self.folder)
        except OSError as err:
            raise CacheError(f"cannot write to the cache folder {self.folder!r}: {err}; {_ADVICE}") from None
        os.close(fd)
        return path

    @contextlib.contextmanager
    def _locked(self, key: str, timeout: float | None = None) -> Iterator[None]:
        timeout = self.lock_timeout if timeout is None else timeout
        path = os.path.join(self.folder, key + _LOCK)
        fd = self._flock(path, key, timeout)
        if fd is None:  # no flock here (Windows, some network file systems): filelock's other locks
            with self._filelock(path, key, timeout):
                yield
            return
        try:
            yield
        finally:
            try:
                fcntl.flock(fd, fcntl.LOCK_UN)
            finally:
                os.close(fd)

    def _flock(self, path: str, key: str, timeout: float) -> int | None:
        """A descriptor of lock file ``path`` holding its exclusive flock (None without flock): the lock
        filelock takes on POSIX, so either excludes the other, without filelock's 5 ms import."""
        if fcntl is None:
            return None
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)  # private
        except OSError as err:
            raise CacheError(f"cannot lock cache entry {key} in {self.folder!r}: {err}") from None
        deadline = time.monotonic() + timeout
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return fd
            except BlockingIOError:
                if time.monotonic() < deadline:
                    time.sleep(0.05)
                    continue
                os.close(fd)
                raise CacheError(self._waited(key, timeout, path)) from None
            except OSError as err:
                os.close(fd)
                if err.errno in (errno.ENOSYS, errno.EOPNOTSUPP, errno.ENOLCK):
                    return None
                raise CacheError(f"cannot lock cache entry {key} in {self.folder!r}: {err}") from None

    def _waited(self, key: str, timeout: float, path: str) -> str:
        return (f"waited {timeout:g} s for another process building cache entry {key} in {self.folder!r}; "
                f"if none is running, delete {path!r}")

    @contextlib.contextmanager
    def _filelock(self, path: str, key: str, timeout: float) -> Iterator[None]:
        import filelock

        lock = filelock.FileLock(path, timeout=timeout, mode=0o600)  # private
        try:
            lock.acquire()
        except filelock.Timeout:
            raise CacheError(self._waited(key, timeout, path)) from None
        except OSError as err:
            raise CacheError(f"cannot lock cache entry {key} in {self.folder!r}: {err}") from None
        try:
            yield
        finally:
            lock.release()


# The cache as a whole (every namespace): built on DiskCache, so imported last.
from .cache_admin import cache_entries, cache_usage, clear_cache, folder_problem, prune  # noqa: E402
