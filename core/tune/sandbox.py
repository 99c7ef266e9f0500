"""The measuring process: builds, runs, checks and times one config at a time.

``python -m loom.tune.sandbox`` reads trials from its stdin and writes results
to its stdout as length-prefixed pickles (:func:`send`, :func:`receive`).  It is
a child of whatever runs the trial (a local thread, a Dask or Ray worker), so a
candidate that crashes or hangs takes down only this process: the parent sees
the pipe close or its deadline pass, records the failure, and starts another.

Per trial it sends ``("phase", "built")`` once the module is built and
``("phase", "measuring")`` once it holds the machine's measuring lock (timing
one candidate at a time per machine, so parallel builds do not disturb
timings; ``("phase", "checked")`` just before it waits for that lock), then
``("result", {...})``.
"""

from __future__ import annotations

import hashlib
import os
import pickle
import struct
import sys
import tempfile
import time
import traceback
from typing import Any, BinaryIO, Optional

__all__ = ["send", "receive", "run_trial_here", "make_inputs", "sample_outputs", "MEASURE_LOCK"]

_HEADER = struct.Struct("<Q")
#: One measurement at a time on a machine: every tuning process there takes this lock to time.
MEASURE_LOCK = os.path.join(tempfile.gettempdir(), f"loom-tune-measure-{os.getuid() if hasattr(os, 'getuid') else 0}.lock")
_SAMPLES = 256


def send(stream: BinaryIO, message: Any) -> None:
    data = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
    stream.write(_HEADER.pack(len(data)) + data)
    stream.flush()


def _read_exact(stream: BinaryIO, n: int) -> Optional[bytes]:
    chunks, left = [], n
    while left:
        chunk = stream.read(left)
        if not chunk:
            return None
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def receive(stream: BinaryIO) -> Any:
    """The next message, or EOFError when the other side has gone."""
    head = _read_exact(stream, _HEADER.size)
    if head is None:
        raise EOFError
    body = _read_exact(stream, _HEADER.unpack(head)[0])
    if body is None:
        raise EOFError
    return pickle.loads(body)


def make_inputs(tensors: list, seed: int) -> tuple[list[Any], list[int]]:
    """Arrays for ``tensors`` (inputs random, outputs zero) and the positions of the outputs."""
    import numpy as np

    from ..te.tensor import PlaceholderOp

    rng = np.random.default_rng(seed)
    arrays, outputs = [], []
    for k, t in enumerate(tensors):
        shape = []
        for dim in t.shape:
            value = getattr(dim, "value", dim)
            if not isinstance(value, int):
                raise ValueError(f"tuning needs static shapes: {t.op.name} has shape {list(t.shape)}")
            shape.append(value)
        dtype = str(t.dtype)
        if not isinstance(t.op, PlaceholderOp):
            arrays.append(np.zeros(shape, dtype=_np_dtype(dtype)))
            outputs.append(k)
        elif dtype.startswith(("float", "bfloat")):
            arrays.append(rng.uniform(-1.0, 1.0, size=shape).astype(_np_dtype(dtype)))
        elif dtype == "bool":
            arrays.append(rng.random(size=shape) < 0.5)
        else:
            arrays.append(rng.integers(-8, 8, size=shape).astype(dtype) if not dtype.startswith("uint")
                          else rng.integers(0, 16, size=shape).astype(dtype))
    return arrays, outputs


def _np_dtype(dtype: str) -> Any:
    if dtype == "bfloat16":
        import ml_dtypes

        return ml_dtypes.bfloat16
    return dtype


def sample_outputs(outputs: list[Any], seed: int) -> list[dict[str, Any]]:
    """A fingerprint of each output to compare candidates by: values at fixed positions and the sum."""
    import numpy as np

    out = []
    for k, arr in enumerate(outputs):
        flat = np.asarray(arr).reshape(-1).astype("float64")
        rng = np.random.default_rng(seed + 7919 * (k + 1))
        pos = rng.integers(0, flat.size, size=min(_SAMPLES, flat.size)) if flat.size else np.zeros(0, "int64")
        out.append({"values": flat[pos].tolist(), "sum": float(flat.sum()), "scale": float(np.abs(flat).max(initial=0))})
    return out


def _error(kind: str, err: BaseException) -> dict[str, Any]:
    lines = str(err).strip().splitlines()
    text = f"{type(err).__name__}: {lines[0] if lines else ''}"
    if len(lines) > 1:
        text += f" (+{len(lines) - 1} lines)"
    return {"error_kind": kind, "error": text[:2000], "detail": "".join(traceback.format_exception(err))[-4000:]}


class _Tasks:
    """Tasks already unpickled in this process, by the hash of their pickle."""

    def __init__(self) -> None:
        self.by_hash: dict[str, Any] = {}

    def get(self, blob: bytes) -> Any:
        digest = hashlib.sha256(blob).hexdigest()
        if digest not in self.by_hash:
            import cloudpickle

            self.by_hash = {digest: cloudpickle.loads(blob)}  # one task at a time is the common case
        return self.by_hash[digest]


_TASKS = _Tasks()


def run_trial_here(spec: dict[str, Any], out: Optional[BinaryIO] = None) -> dict[str, Any]:
    """Build, run, check and time config ``spec["index"]`` of the task pickled in ``spec["task"]``."""
    import numpy as np

    import loom

    def phase(name: str) -> None:
        if out is not None:
            send(out, ("phase", name))

    result: dict[str, Any] = {"timings": [], "build_s": None, "error": None, "error_kind": None, "check": None}
    try:
        task = _TASKS.get(spec["task"])
        config = task.space.get(spec["index"])
    except Exception as err:  # noqa: BLE001 - a bad payload is this trial's failure, not the process's
        result.update(_error("invalid", err))
        return result
    start = time.perf_counter()
    try:
        sch, tensors = task.instantiate(config)
        module = loom.build(sch, tensors, target=task.target)
    except Exception as err:  # noqa: BLE001
        result.update(_error("build", err))
        return result
    result["build_s"] = time.perf_counter() - start
    phase("built")
    try:
        arrays, outputs = make_inputs(tensors, spec.get("seed", 0))
        dev = loom.device(task.target.device_type, 0)
        host = dev.device_type == 1
        args = arrays if host else [loom.nd.array(a, dev) for a in arrays]
        module(*args)
        got = [args[k] if host else args[k].numpy() for k in outputs]
    except Exception as err:  # noqa: BLE001
        result.update(_error("run", err))
        return result
    if task.reference is not None:
        try:
            expected = task.reference(*[arrays[k] for k in range(len(arrays)) if k not in outputs])
            expected = list(expected) if isinstance(expected, (list, tuple)) else [expected]
            for k, (g, e) in enumerate(zip(got, expected)):
                np.testing.assert_allclose(np.asarray(g, "float64"), np.asarray(e, "float64"),
                                           rtol=spec.get("rtol", 1e-3), atol=spec.get("atol", 1e-3),
                                           err_msg=f"output {k}")
        except Exception as err:  # noqa: BLE001
            result.update(_error("wrong", err))
            return result
    else:
        result["check"] = sample_outputs(got, spec.get("seed", 0))
    phase("checked")
    try:
        import filelock

        lock = filelock.FileLock(MEASURE_LOCK) if spec.get("exclusive", True) else None
        if lock is not None:
            lock.acquire()
        try:
            phase("measuring")
            timer = module.time_evaluator(module.entry_name, dev, number=spec.get("number", 1),
                                          repeat=spec.get("repeat", 3), min_repeat_ms=spec.get("min_repeat_ms", 0))
            result["timings"] = [float(t) for t in timer(*args).results]
        finally:
            if lock is not None:
                lock.release()
    except Exception as err:  # noqa: BLE001
        result.update(_error("run", err))
    return result


def main() -> None:
    """Serve trials from stdin until it closes."""
    # Results travel on a private copy of fd 1; fd 1 itself (Python's prints and native
    # code's writes alike) goes to stderr, so nothing stray lands in the result stream.
    stdout = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    stdin = sys.stdin.buffer
    while True:
        try:
            message = receive(stdin)
        except EOFError:
            return
        if message == ("exit",):
            return
        send(stdout, ("result", run_trial_here(message, stdout)))


if __name__ == "__main__":
    main()
