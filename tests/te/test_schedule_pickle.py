"""Schedules pickle with their sharing intact, so work can be shipped to worker processes."""

from __future__ import annotations

import pickle
import subprocess
import sys

import numpy as np

import loom
from loom.testing.conformance.programs import tiled_matmul


def test_a_pickled_schedule_lowers_to_the_same_ir():
    s, args = tiled_matmul(32, 32, 32)
    s2, args2 = pickle.loads(pickle.dumps((s, args)))
    assert loom.structural_equal(loom.lower(s2, args2), loom.lower(s, args))


def test_a_pickled_cpu_schedule_builds_and_runs():
    A = loom.placeholder((13, 17), name="A")
    B = loom.compute((13, 17), lambda i, j: A[i, j] * 2.0 + 1.0, name="B")
    s = loom.create_schedule(B.op)
    xo, xi = s[B].split(B.op.axis[1], factor=4)
    s[B].vectorize(xi)
    s2, (A2, B2) = pickle.loads(pickle.dumps((s, [A, B])))
    f = loom.build(s2, [A2, B2], target="interp")
    a = np.random.default_rng(0).standard_normal((13, 17)).astype("float32")
    b = np.zeros_like(a)
    f(a, b)
    np.testing.assert_allclose(b, a * 2 + 1)


def test_a_schedule_pickled_in_one_process_lowers_in_another():
    s, args = tiled_matmul(32, 32, 32)
    data = pickle.dumps((s, args))
    code = ("import pickle, sys, loom\n"
            "s, args = pickle.loads(sys.stdin.buffer.read())\n"
            "print(loom.lower(s, args))\n")
    out = subprocess.run([sys.executable, "-c", code], input=data, capture_output=True, timeout=120)
    assert out.returncode == 0, out.stderr.decode()
    assert out.stdout.decode().strip() == str(loom.lower(s, args)).strip()
