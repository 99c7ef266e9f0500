"""Drive ``tvm_kernels.py --serve`` in TVM's own environment from Loom's.

TVM and Loom live in different virtual environments, so ``run.py`` keeps one
TVM process alive for the whole run and asks it, one JSON line at a time, to
prepare (build and check) and to time kernels.  That lets TVM's kernels take
turns with numpy's and Loom's round by round (``harness.interleave``).
"""

from __future__ import annotations

import json
import pathlib
import subprocess
import tempfile
from typing import Any

from harness import Candidate
from workloads import Workload

__all__ = ["TvmClient", "TvmUnavailable"]

HERE = pathlib.Path(__file__).resolve().parent

#: TVM's pool threads spin (yielding) for about 0.2 s after a parallel call, measured as
#: the TVM process's CPU time after a call: the next implementation's turn waits them out,
#: or a sub-millisecond kernel timed then shares both cores with them.
TVM_SPIN_SECONDS = 0.25


class TvmUnavailable(RuntimeError):
    """The TVM process could not start or stopped answering."""


class TvmClient:
    """One ``tvm_kernels.py --serve`` process; use as a context manager.

    :param python: the TVM environment's interpreter (``bench/.venv-tvm/bin/python``).
    :param quick: pass ``--quick`` (the same timing policy as the Loom side).
    """

    def __init__(self, python: pathlib.Path, quick: bool) -> None:
        self._stderr = tempfile.TemporaryFile(mode="w+")
        command = [str(python), str(HERE / "tvm_kernels.py"), "--serve", *(["--quick"] if quick else [])]
        self._proc = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                      stderr=self._stderr, text=True)
        header = self._read()
        self.version = f"Apache TVM {header['tvm']}, target {header['target']}"

    def __enter__(self) -> TvmClient:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def close(self) -> None:
        if self._proc.poll() is None:
            self._proc.stdin.close()
            try:
                self._proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self._proc.kill()
        self._stderr.close()

    def _read(self) -> dict:
        line = self._proc.stdout.readline()
        if not line:
            self._stderr.seek(0)
            tail = self._stderr.read().strip().splitlines()[-1:] or ["no message"]
            raise TvmUnavailable(f"the TVM process exited ({self._proc.poll()}): {tail[0]}")
        return json.loads(line)

    def _ask(self, request: dict) -> dict:
        try:
            self._proc.stdin.write(json.dumps(request) + "\n")
            self._proc.stdin.flush()
        except BrokenPipeError:
            pass  # _read reports why the process went away
        return self._read()

    def candidate(self, wl: Workload) -> Candidate:
        """TVM's kernel for ``wl``, built and checked in the TVM process, timed there on request."""
        try:
            info = self._ask({"prepare": wl.name})
        except TvmUnavailable as err:
            return Candidate(wl.name, "tvm", failed=str(err))
        if "failed" in info:
            return Candidate(wl.name, "tvm", failed=info["failed"])
        return Candidate(wl.name, "tvm", lambda: self._ask({"time": wl.name})["seconds"],
                         info["first"], info["error"], settle=TVM_SPIN_SECONDS)
