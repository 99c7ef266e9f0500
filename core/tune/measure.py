"""Running one trial on whatever machine the executor picked: :func:`run_trial`.

An executor (a local thread pool, a Dask worker, a Ray task) calls
:func:`run_trial` with a trial spec.  The trial runs in a :class:`Sandbox`, a
child process of that worker (``python -m loom.tune.sandbox``) kept for the
next trials of the same thread.  The worker only waits: when the child dies or
passes its deadline it is killed and replaced, and the trial is recorded as a
``crash`` or ``timeout``; the search goes on.

Deadlines (``spec["timeout"]`` seconds each): building; then the first run and
its check; then timing, counted from the moment the child holds the machine's
measuring lock (waiting for other candidates' timing does not count).
"""

from __future__ import annotations

import atexit
import os
import select
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from typing import Any, Iterable, Optional

from .sandbox import receive, send

__all__ = ["run_trial", "Sandbox", "shutdown_sandboxes"]

#: How long a built candidate may wait for the measuring lock before it counts as hung.
LOCK_WAIT = 3600.0

_local = threading.local()
_all: list["Sandbox"] = []
_all_lock = threading.Lock()


def _child_env(num_threads: Optional[int]) -> dict[str, str]:
    env = dict(os.environ)
    # The child imports what this process imports (templates defined in test files, scripts' folders).
    paths = [p for p in sys.path + env.get("PYTHONPATH", "").split(os.pathsep) if p and os.path.isdir(p)]
    env["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(paths))
    # Candidates are built once: keep them out of the compile cache.
    env["LOOM_CACHE"] = "0"
    if num_threads:
        env["LOOM_NUM_THREADS"] = str(num_threads)
        env["OMP_NUM_THREADS"] = str(num_threads)
    return env


class Sandbox:
    """A measuring child process and the pipes to it."""

    def __init__(self, num_threads: Optional[int]) -> None:
        self.num_threads = num_threads
        self.owner = threading.current_thread()
        self.stderr = tempfile.TemporaryFile()
        self.proc = subprocess.Popen([sys.executable, "-m", "loom.tune.sandbox"], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=self.stderr, bufsize=0,
                                     env=_child_env(num_threads), start_new_session=True)
        assert self.proc.stdout is not None
        self._out: Any = self.proc.stdout
        with _all_lock:
            _all.append(self)

    @property
    def alive(self) -> bool:
        return self.proc.poll() is None

    def close(self) -> None:
        if self.alive:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except OSError:
                self.proc.kill()
        self.proc.wait()
        for stream in (self.proc.stdin, self.proc.stdout):
            try:
                stream.close()  # type: ignore[union-attr]
            except OSError:
                pass
        self.stderr.close()
        with _all_lock:
            if self in _all:
                _all.remove(self)

    def _stderr_tail(self, since: int) -> str:
        self.stderr.seek(since)
        text = self.stderr.read().decode("utf-8", "replace").strip()
        return text[-1500:]

    def run(self, spec: dict[str, Any], timeout: float) -> dict[str, Any]:
        """Run ``spec`` in the child; failures of the child itself become ``crash``/``timeout`` results."""
        since = self.stderr.seek(0, os.SEEK_END)
        started = time.perf_counter()
        try:
            send(self.proc.stdin, spec)  # type: ignore[arg-type]
        except (BrokenPipeError, OSError):
            return self._died(since, started, "before the trial started")
        deadline, phase = time.monotonic() + timeout, "building"
        while True:
            left = deadline - time.monotonic()
            ready = select.select([self._out], [], [], max(0.0, left))[0] if left > 0 else []
            if not ready:
                self.close()
                return {"error_kind": "timeout", "error": f"timed out after {timeout:g} s while {phase}",
                        "timings": [], "build_s": None, "check": None}
            try:
                kind, value = receive(self._out)
            except (EOFError, OSError):
                return self._died(since, started, f"while {phase}")
            if kind == "result":
                return value
            if value == "built":
                deadline, phase = time.monotonic() + timeout, "running and checking"
            elif value == "checked":
                deadline, phase = time.monotonic() + LOCK_WAIT, "waiting for the measuring lock"
            elif value == "measuring":
                deadline, phase = time.monotonic() + timeout, "timing"

    def _died(self, since: int, started: float, when: str) -> dict[str, Any]:
        self.proc.wait()
        code = self.proc.returncode
        how = f"signal {signal.Signals(-code).name}" if code is not None and code < 0 else f"exit code {code}"
        tail = self._stderr_tail(since)
        self.close()
        text = f"the measuring process died ({how}) {when}"
        return {"error_kind": "crash", "error": text + (f": {tail.splitlines()[-1]}" if tail else ""),
                "detail": tail, "timings": [], "build_s": None, "check": None}


def _sandbox(num_threads: Optional[int]) -> Sandbox:
    box = getattr(_local, "sandbox", None)
    if box is None or not box.alive or box.num_threads != num_threads:
        if box is not None:
            box.close()
        with _all_lock:  # the processes of threads that have ended (a user's pool, shut down) go too
            orphans = [b for b in _all if not b.owner.is_alive()]
        for orphan in orphans:
            orphan.close()
        box = _local.sandbox = Sandbox(num_threads)
    return box


def run_trial(spec: dict[str, Any]) -> dict[str, Any]:
    """Run one trial in this thread's sandbox; the result, with the host that measured it.

    ``spec``: ``task`` (the cloudpickled Task), ``index`` (the config), ``timeout``,
    ``num_threads``, and the measuring options (``number``, ``repeat``,
    ``min_repeat_ms``, ``seed``, ``rtol``, ``atol``, ``exclusive``).
    """
    box = _sandbox(spec.get("num_threads"))
    result = box.run(spec, float(spec.get("timeout", 10.0)))
    result["index"] = spec["index"]
    result["host"] = socket.gethostname()
    return result


@atexit.register
def shutdown_sandboxes(threads: Optional[Iterable[threading.Thread]] = None) -> None:
    """Stop the measuring processes started by ``threads`` (default: all of this process's)."""
    owners = None if threads is None else set(threads)
    with _all_lock:
        boxes = [b for b in _all if owners is None or b.owner in owners]
    for box in boxes:
        box.close()
