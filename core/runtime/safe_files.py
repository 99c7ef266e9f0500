"""Reading files Loom is handed (exported modules, cache entries): regular files only, never blocking.

``open()`` of a FIFO waits for a writer forever, ``/dev/zero`` never ends, and a
folder or a device is no module.  :func:`open_regular` opens without blocking and
checks the *opened* file (not the name, which may change meanwhile) is a regular
file; :func:`read_regular_file` then reads exactly the size it had, so what it
returns is one snapshot of the file or an error.

>>> import os, tempfile
>>> path = os.path.join(tempfile.mkdtemp(), "x.bin")
>>> _ = open(path, "wb").write(b"abc")
>>> read_regular_file(path)
b'abc'
>>> read_regular_file(os.devnull)
Traceback (most recent call last):
  ...
loom.runtime.safe_files.NotARegularFile: '/dev/null' is a character device, not a regular file
"""

from __future__ import annotations

import os
import stat

from ..errors import LoomValueError

__all__ = ["NotARegularFile", "file_kind", "open_regular", "read_fd", "read_regular_file"]

_CHUNK = 1 << 20


class NotARegularFile(LoomValueError):
    """A path names a folder, FIFO, device, socket or (when not followed) a symbolic link."""


def file_kind(mode: int) -> str:
    """Words for the kind of file of ``st_mode``: ``"a regular file"``, ``"a FIFO"``..."""
    for test, words in ((stat.S_ISREG, "a regular file"), (stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a FIFO"),
                        (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
                        (stat.S_ISSOCK, "a socket"), (stat.S_ISLNK, "a symbolic link")):
        if test(mode):
            return words
    return "not a regular file"


def open_regular(path: str | os.PathLike[str], *, follow_symlinks: bool = True) -> tuple[int, os.stat_result]:
    """An open read-only descriptor of the regular file ``path`` and its ``fstat``; the caller closes it.

    :raises NotARegularFile: when ``path`` is anything else (a symbolic link too, unless ``follow_symlinks``).
    :raises OSError: when it cannot be opened (missing, no permission).
    """
    path = os.fspath(path)
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
    if not follow_symlinks:
        flags |= getattr(os, "O_NOFOLLOW", 0)
    try:
        fd = os.open(path, flags)
    except OSError as err:
        if not follow_symlinks and os.path.islink(path):  # O_NOFOLLOW answers ELOOP
            raise NotARegularFile(f"{path!r} is a symbolic link, not a regular file") from None
        if isinstance(err, IsADirectoryError):
            raise NotARegularFile(f"{path!r} is a folder, not a regular file") from None
        raise
    try:
        st = os.fstat(fd)
    except OSError:
        os.close(fd)
        raise
    if not stat.S_ISREG(st.st_mode):
        os.close(fd)
        raise NotARegularFile(f"{path!r} is {file_kind(st.st_mode)}, not a regular file")
    return fd, st


def read_fd(fd: int, size: int) -> bytes:
    """Up to ``size`` bytes from ``fd`` (fewer only when the file ends first)."""
    parts, left = [], size
    while left > 0:
        chunk = os.read(fd, min(left, _CHUNK))
        if not chunk:
            break
        parts.append(chunk)
        left -= len(chunk)
    return b"".join(parts)


def read_regular_file(path: str | os.PathLike[str], *, follow_symlinks: bool = True) -> bytes:
    """The content of the regular file ``path``, read at the size it had when opened.

    :raises NotARegularFile: when ``path`` is not a regular file.
    :raises LoomValueError: when the file changes size while it is read.
    :raises OSError: when it cannot be opened or read.
    """
    fd, st = open_regular(path, follow_symlinks=follow_symlinks)
    try:
        data = read_fd(fd, st.st_size)
        if len(data) != st.st_size or os.read(fd, 1):
            raise LoomValueError(f"{os.fspath(path)!r} changed size while it was read")
    finally:
        os.close(fd)
    return data
