"""Helpers of the topi tests: build an operator with topi's schedule for a target and run it."""

from __future__ import annotations

import numpy as np

import loom
from loom import topi


def rand(shape, dtype="float32", seed=0):
    return np.random.default_rng(seed).uniform(-1, 1, size=shape).astype(dtype)


def run(outs, args, inputs, target, schedule=topi.generic.schedule_injective):
    """Schedule ``outs`` with ``schedule`` under ``target``, build, run on ``inputs``; return the outputs."""
    with loom.Target(target):
        s = schedule(outs)
    f = loom.build(s, args, target)
    outputs = [np.zeros(topi.util.get_const_tuple(t.shape), t.dtype) for t in args[len(inputs):]]
    f(*inputs, *outputs)
    return outputs
