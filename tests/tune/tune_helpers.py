"""Templates shared by the loom.tune tests (module level: measuring processes import them by name)."""

import os
import signal
import time

import loom
from loom import tune
from loom.tune import Config

MODES = ["ok", "ok2", "raise", "wrong", "crash", "hang"]


@tune.template
def faulty(cfg, n):
    """``B = 2 * A``, with configs that fail each way a candidate can: only when a trial builds them."""
    cfg.define_knob("mode", MODES)
    mode = cfg["mode"].val
    if isinstance(cfg, Config) and os.environ.get("LOOM_CACHE") == "0":  # in a measuring process
        if mode == "raise":
            raise RuntimeError("this config does not build")
        if mode == "crash":
            os.kill(os.getpid(), signal.SIGSEGV)
        if mode == "hang":
            time.sleep(120)
    A = loom.placeholder((n,), name="A")
    extra = 1.0 if mode == "wrong" else 0.0
    B = loom.compute((n,), lambda i: A[i] * 2.0 + extra, name="B")
    s = loom.create_schedule(B.op)
    if mode == "ok2":
        s[B].vectorize(s[B].split(B.op.axis[0], factor=4)[1])
    return s, [A, B]


@tune.template
def scaled(cfg, n):
    """``B = 3 * A`` over a small split space: every config is valid."""
    A = loom.placeholder((n,), name="A")
    B = loom.compute((n,), lambda i: A[i] * 3.0, name="B")
    s = loom.create_schedule(B.op)
    cfg.define_split("split", n, num_outputs=2)
    cfg.define_knob("vec", [False, True])
    _, inner = cfg["split"].apply(s, B, B.op.axis[0])
    if cfg["vec"].val:
        s[B].vectorize(inner)
    cfg.add_flop(n)
    return s, [A, B]
