"""Room on Python's stack for deep IR, and a clear error past it.

Loom's visitors, simplifiers, printer, structural comparison, interpreter and
code generators recurse once per nesting level of an expression: a chain of
``n`` operations (``A[0] + A[1] + ... + A[n]``, an unrolled reduction) is
``n`` levels deep, and each level takes about four to six Python frames.
Python's default limit of 1000 frames stops at about 200 levels.

Loom's entry points (``lower``, ``build``, ``compute``, ``create_schedule``,
``save_json``/``load_json``, ``structural_equal``/``structural_hash``, the
printer, the hybrid parser) run inside :func:`deep_recursion`, which raises the
interpreter's limit to :data:`RECURSION_LIMIT` frames for as long as any of
them runs and restores it afterwards.  A RecursionError past that limit, even
one a pass or a backend wrapped in another error, becomes a
:class:`~loom.errors.LoomError` saying the IR is nested too deeply: never a
bare RecursionError.

The limit is kept where the C stack still holds it.  Python 3.11 runs a call
from Python to Python without using the C stack, but a frame entered through
C (``all(...)`` over a generator, ``__eq__``, ``map``) takes about 450 bytes
of it, and the main thread has 8 MB on Linux.  So the hot walks loop in plain
Python (loom.arith's expression equality did not, and was the only one that
mattered); measured, 5000 nested operations build end to end for interp,
llvm and c (7000 for interp and llvm) with under 200 kB of C stack.  A walk that entered C once
every three frames would still stay under 6 MB at the limit.  Past it, about
7000 levels for the C backend's walks (the deepest, 5.3 frames a level) and
about 9000 for the others, comes the clean error.  Python 3.10 uses the C stack
for every frame, so there the limit is a quarter (about 2000 levels).

>>> import sys
>>> old = sys.getrecursionlimit()
>>> with deep_recursion("an example"):
...     sys.getrecursionlimit() >= RECURSION_LIMIT
True
>>> sys.getrecursionlimit() == old
True
"""

from __future__ import annotations

import contextlib
import sys
import threading
from typing import Iterator

from ..errors import LoomError

__all__ = ["RECURSION_LIMIT", "deep_recursion", "too_deep", "caused_by_recursion"]

#: The recursion limit (in Python frames) while a Loom entry point runs.  Before 3.11 every Python
#: frame also takes C stack (a few hundred bytes): there about 2000 levels fit, not 9000.
RECURSION_LIMIT = 40000 if sys.version_info >= (3, 11) else 10000

_lock = threading.Lock()
_active = 0  # entry points running now, in every thread (the limit is the interpreter's)
_saved = 0  # the limit to restore when the last one leaves


def caused_by_recursion(err: BaseException) -> bool:
    """Whether ``err`` is a RecursionError or was raised while handling one (a pass wraps what it catches)."""
    seen: set[int] = set()
    e: BaseException | None = err
    while e is not None and id(e) not in seen:
        if isinstance(e, RecursionError):
            return True
        seen.add(id(e))
        # ``raise ... from None`` is a deliberate translation (load_json's SerializationError): stop there.
        e = e.__cause__ if e.__cause__ is not None else None if e.__suppress_context__ else e.__context__
    return False


def too_deep(what: str) -> LoomError:
    """The error for IR nested past what :data:`RECURSION_LIMIT` allows, naming the operation ``what``."""
    err = LoomError(f"{what}: the IR is nested too deeply (an expression or statement chain of thousands of "
                    f"levels ran past Loom's recursion limit of {RECURSION_LIMIT} frames); build long chains "
                    f"as reductions (loom.sum over a reduce_axis) or in smaller steps")
    err.too_deep = True  # type: ignore[attr-defined]  # enclosing entry points pass it on as it is
    return err


@contextlib.contextmanager
def deep_recursion(what: str = "walking the IR") -> Iterator[None]:
    """Run the block with the recursion limit at :data:`RECURSION_LIMIT` at least.

    Nested and concurrent uses share one raise of the limit; the last one to
    leave restores it.  A RecursionError escaping the block (or a LoomError
    caused by one) is re-raised as :func:`too_deep`'s error naming ``what``.
    """
    global _active, _saved
    with _lock:
        if _active == 0:
            _saved = sys.getrecursionlimit()
            if _saved < RECURSION_LIMIT:
                sys.setrecursionlimit(RECURSION_LIMIT)
        _active += 1
    try:
        yield
    except RecursionError:
        raise too_deep(what) from None
    except LoomError as err:
        if getattr(err, "too_deep", False) or not caused_by_recursion(err):
            raise
        raise too_deep(what) from err  # a pass or a backend wrapped the RecursionError
    finally:
        with _lock:
            _active -= 1
            if _active == 0 and _saved < RECURSION_LIMIT == sys.getrecursionlimit():
                sys.setrecursionlimit(_saved)

