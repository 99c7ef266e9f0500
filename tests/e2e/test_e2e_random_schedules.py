"""Random schedules of small programs agree with numpy on every buildable target.

Each example draws shapes the factors rarely divide, then a random sequence of
loop primitives (split, fuse, reorder, tile, unroll, vectorize, parallel) and
placements (compute_at, compute_inline), under random build options.
"""

import os

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import loom

from e2e_kinds import buildable_kinds

KINDS = buildable_kinds()


def _apply_loop_primitives(draw, stage, axes):
    """Split, reorder, fuse and annotate the leaf axes of one stage."""
    leaves = list(axes)
    for _ in range(draw(st.integers(0, 3))):
        k = draw(st.integers(0, len(leaves) - 1))
        choice = draw(st.sampled_from(["factor", "nparts"]))
        size = draw(st.integers(1, 6))
        outer, inner = stage.split(leaves[k], **{choice: size})
        leaves[k:k + 1] = [outer, inner]
    if len(leaves) > 1 and draw(st.booleans()):
        order = draw(st.permutations(leaves))
        stage.reorder(*order)
        leaves = list(order)
    if len(leaves) > 1 and draw(st.booleans()):
        k = draw(st.integers(0, len(leaves) - 2))
        fused = stage.fuse(leaves[k], leaves[k + 1])
        leaves[k:k + 2] = [fused]
    annotation = draw(st.sampled_from(["none", "unroll", "vectorize", "parallel"]))
    data_par = [iv for iv in leaves if iv.iter_type != "reduce"]  # reductions only unroll
    if annotation == "unroll":
        stage.unroll(leaves[-1])
    elif annotation == "parallel" and data_par:
        stage.parallel(data_par[0])
    elif annotation == "vectorize" and data_par:
        stage.vectorize(data_par[-1])
    return leaves


@st.composite
def matmul_case(draw):
    m, n, k = (draw(st.integers(1, 9)) for _ in range(3))
    A = loom.placeholder((m, k), name="A")
    B = loom.placeholder((k, n), name="B")
    r = loom.reduce_axis((0, k), name="r")
    C = loom.compute((m, n), lambda i, j: loom.sum(A[i, r] * B[r, j], axis=r), name="C")
    s = loom.create_schedule(C.op)
    _apply_loop_primitives(draw, s[C], list(C.op.axis) + list(C.op.reduce_axis))
    return (m, n, k), s, [A, B, C]


@st.composite
def pipeline_case(draw):
    m, n = draw(st.integers(1, 11)), draw(st.integers(1, 11))
    A = loom.placeholder((m, n), name="A")
    B = loom.compute((m, n), lambda i, j: A[i, j] * 2.0, name="B")
    C = loom.compute((m, n), lambda i, j: B[i, j] + A[i, j], name="C")
    D = loom.compute((m, n), lambda i, j: C[i, j] - 1.0, name="D")
    s = loom.create_schedule(D.op)
    leaves = _apply_loop_primitives(draw, s[D], list(D.op.axis))
    for producer in (C, B):
        where = draw(st.sampled_from(["root", "inline", "at"]))
        if where == "inline":
            s[producer].compute_inline()
        elif where == "at":
            consumer = D if producer is C or s[C].attach_type == "inline" else C
            target_axes = s[consumer].leaf_iter_vars
            s[producer].compute_at(s[consumer], draw(st.sampled_from(list(target_axes))))
    del leaves
    return (m, n), s, [A, D]


def _check(got, want, s, args, options):
    """Compare; on a mismatch show the lowered IR, which is what one needs to debug."""
    if not np.allclose(got, want, rtol=1e-4, atol=1e-4, equal_nan=False):
        with loom.build_config(**options):
            text = str(loom.lower(s, args))
        raise AssertionError(f"wrong result\ngot  {got}\nwant {want}\nunder {options}:\n{text}")


OPTIONS = st.fixed_dictionaries({
    "partition_const_loop": st.booleans(),
    "auto_unroll_max_step": st.sampled_from([0, 8, 64]),
    "disable_vectorize": st.booleans(),
    "unroll_explicit": st.booleans(),
})

SETTINGS = settings(max_examples=int(os.environ.get("LOOM_E2E_EXAMPLES", "25")), deadline=None, suppress_health_check=[HealthCheck.too_slow])


@given(matmul_case(), OPTIONS, st.sampled_from(KINDS))
@SETTINGS
def test_random_matmul_schedules(case, options, target):
    (m, n, k), s, args = case
    with loom.build_config(**options):
        f = loom.build(s, args, target=target)
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((m, k)).astype("float32"), rng.standard_normal((k, n)).astype("float32")
    c = np.full((m, n), np.nan, "float32")
    f(a, b, c)
    _check(c, a @ b, s, args, options)


@given(pipeline_case(), OPTIONS, st.sampled_from(KINDS))
@SETTINGS
def test_random_pipeline_schedules(case, options, target):
    (m, n), s, args = case
    with loom.build_config(**options):
        f = loom.build(s, args, target=target)
    a = np.random.default_rng(1).standard_normal((m, n)).astype("float32")
    d = np.full((m, n), np.nan, "float32")
    f(a, d)
    _check(d, a * 3.0 - 1.0, s, args, options)
