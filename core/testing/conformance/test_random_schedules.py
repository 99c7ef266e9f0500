"""Random schedules of small programs agree with numpy on the kind under test.

Each example draws shapes the factors rarely divide, then a random sequence of
loop primitives (split, fuse, reorder, tile, unroll, vectorize, parallel,
prefetch) and placements (compute_at, compute_inline), under random build options.  For a
device kind the output's loops are bound to blocks and threads after the random
primitives (vectorize and parallel are CPU annotations, so they are not drawn),
and each producer is inlined, computed inside the thread's loop, or bound itself.
``LOOM_E2E_EXAMPLES`` sets the number of examples per test and kind (default 30).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from hypothesis import given, note
from hypothesis import strategies as st

import loom

from .harness import KindUnderTest, bind_root, hypothesis_settings, is_reduce

SETTINGS = hypothesis_settings(30)

OPTIONS = st.fixed_dictionaries({
    "partition_const_loop": st.booleans(),
    "auto_unroll_max_step": st.sampled_from([0, 8, 64]),
    "disable_vectorize": st.booleans(),
    "unroll_explicit": st.booleans(),
})


def _loop_primitives(draw: Any, stage: Any, axes: list[Any], cpu: bool) -> list[Any]:
    """Split, reorder, fuse and annotate the leaf axes of one stage."""
    leaves = list(axes)
    for _ in range(draw(st.integers(0, 3))):
        k = draw(st.integers(0, len(leaves) - 1))
        choice = draw(st.sampled_from(["factor", "nparts"]))
        outer, inner = stage.split(leaves[k], **{choice: draw(st.integers(1, 6))})
        leaves[k:k + 1] = [outer, inner]
    if len(leaves) > 1 and draw(st.booleans()):
        order = draw(st.permutations(leaves))
        stage.reorder(*order)
        leaves = list(order)
    if len(leaves) > 1 and draw(st.booleans()):
        k = draw(st.integers(0, len(leaves) - 2))
        leaves[k:k + 2] = [stage.fuse(leaves[k], leaves[k + 1])]
    annotation = draw(st.sampled_from(["none", "unroll", "vectorize", "parallel"] if cpu else ["none", "unroll"]))
    data_par = [iv for iv in leaves if not is_reduce(iv)]  # reductions only unroll
    if annotation == "unroll" and (cpu or is_reduce(leaves[-1])):  # bound loops are fused: unroll a serial one
        stage.unroll(leaves[-1])
    elif annotation == "parallel" and data_par:
        stage.parallel(data_par[0])
    elif annotation == "vectorize" and data_par:
        stage.vectorize(data_par[-1])
    return leaves


def _maybe_prefetch(draw: Any, stage: Any, tensors: list[Any]) -> None:
    """Perhaps prefetch an input some iterations ahead in a serial loop: a hint that changes no result."""
    serial = [iv for iv in stage.leaf_iter_vars
              if (a := stage.iter_var_attrs.get(iv)) is None or (a.iter_type != "vectorized" and a.bind_thread is None)]
    if serial and draw(st.booleans()):
        stage.prefetch(draw(st.sampled_from(tensors)), draw(st.sampled_from(serial)), draw(st.integers(0, 3)))


@st.composite
def matmul_case(draw: Any, kind: KindUnderTest) -> tuple[tuple[int, int, int], Any, list[Any]]:
    m, n, k = (draw(st.integers(1, 9)) for _ in range(3))
    A = loom.placeholder((m, k), name="A")
    B = loom.placeholder((k, n), name="B")
    r = loom.reduce_axis((0, k), name="r")
    C = loom.compute((m, n), lambda i, j: loom.sum(A[i, r] * B[r, j], axis=r), name="C")
    s = loom.create_schedule(C.op)
    if kind.on_device:  # a local accumulator per thread, placed inside the bound loops
        CC = s.cache_write(C, "local")
        _loop_primitives(draw, s[CC], list(CC.op.axis) + list(CC.op.reduce_axis), cpu=False)
        _loop_primitives(draw, s[C], list(C.op.axis), cpu=False)
        _, tx = bind_root(s, C, draw(st.sampled_from([4, 8, 16])))
        s[CC].compute_at(s[C], tx)
        _maybe_prefetch(draw, s[CC], [A, B])
    else:
        _loop_primitives(draw, s[C], list(C.op.axis) + list(C.op.reduce_axis), cpu=True)
        _maybe_prefetch(draw, s[C], [A, B])
    return (m, n, k), s, [A, B, C]


def _place_for_device(draw: Any, s: Any, producer: Any, consumer: Any) -> None:
    """Inline ``producer``, compute it inside ``consumer``'s innermost loop (the thread's), or bind it."""
    where = draw(st.sampled_from(["inline", "at", "bound"]))
    if where == "inline":
        s[producer].compute_inline()
    elif where == "at":  # thread-private, as GPU schedules have it (ThreadSync mishandles a global one here)
        s[producer].compute_at(s[consumer], s[consumer].leaf_iter_vars[-1])
        s[producer].set_scope("local")
    else:
        _loop_primitives(draw, s[producer], list(producer.op.axis), cpu=False)
        bind_root(s, producer, draw(st.sampled_from([4, 8, 16])))


@st.composite
def pipeline_case(draw: Any, kind: KindUnderTest) -> tuple[tuple[int, int], Any, list[Any]]:
    m, n = draw(st.integers(1, 11)), draw(st.integers(1, 11))
    A = loom.placeholder((m, n), name="A")
    B = loom.compute((m, n), lambda i, j: A[i, j] * 2.0, name="B")
    C = loom.compute((m, n), lambda i, j: B[i, j] + A[i, j], name="C")
    D = loom.compute((m, n), lambda i, j: C[i, j] - 1.0, name="D")
    s = loom.create_schedule(D.op)
    _loop_primitives(draw, s[D], list(D.op.axis), cpu=not kind.on_device)
    if kind.on_device:
        bind_root(s, D, draw(st.sampled_from([4, 8, 16])))
        _place_for_device(draw, s, C, D)
        _place_for_device(draw, s, B, D if s[C].attach_type == "inline" else C)
        return (m, n), s, [A, D]
    for producer in (C, B):
        where = draw(st.sampled_from(["root", "inline", "at"]))
        if where == "inline":
            s[producer].compute_inline()
        elif where == "at":
            consumer = D if producer is C or s[C].attach_type == "inline" else C
            s[producer].compute_at(s[consumer], draw(st.sampled_from(list(s[consumer].leaf_iter_vars))))
    return (m, n), s, [A, D]


def _lowered(s: Any, args: list[Any], options: dict[str, Any]) -> str:
    with loom.build_config(**options):
        return str(loom.lower(s, args))


def _run(kind: KindUnderTest, s: Any, args: list[Any], options: dict[str, Any], values: list[Any],
         want: np.ndarray) -> None:
    """Build, run and compare; on any failure show the lowered IR, which is what one needs to debug."""
    try:
        with loom.build_config(**options):
            f = kind.build(s, args)
        got = kind.run(f, *values)[-1]
    except Exception:
        note(f"under {options}:\n{_lowered(s, args, options)}")
        raise
    if not np.allclose(got, want, rtol=1e-4, atol=1e-4, equal_nan=False):
        raise AssertionError(f"wrong result\ngot  {got}\nwant {want}\nunder {options}:\n{_lowered(s, args, options)}")


@given(data=st.data(), options=OPTIONS)
@SETTINGS
def test_random_matmul_schedules(kind_under_test: KindUnderTest, data: Any, options: dict[str, Any]) -> None:
    (m, n, k), s, args = data.draw(matmul_case(kind_under_test), label="case")
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((m, k)).astype("float32"), rng.standard_normal((k, n)).astype("float32")
    _run(kind_under_test, s, args, options, [a, b, np.full((m, n), np.nan, "float32")], a @ b)


@given(data=st.data(), options=OPTIONS)
@SETTINGS
def test_random_pipeline_schedules(kind_under_test: KindUnderTest, data: Any, options: dict[str, Any]) -> None:
    (m, n), s, args = data.draw(pipeline_case(kind_under_test), label="case")
    a = np.random.default_rng(1).standard_normal((m, n)).astype("float32")
    _run(kind_under_test, s, args, options, [a, np.full((m, n), np.nan, "float32")], a * 3.0 - 1.0)
