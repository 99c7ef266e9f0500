"""Warp shuffles on the interpreter: CUDA's ``__shfl_down_sync``/``__shfl_sync`` lanes, segments, masks, divergence.

Each kernel stores, per thread, what its shuffle returned at the thread's linear index
(threadIdx.x fastest); the expected values are computed here from the CUDA rules.
"""

import numpy as np
import pytest

import loom
from loom.ir import BufferStore, Call, IfThenElse, Op, seq
from loom.testing import BarrierError, InterpreterError, RaceError, evaluate

from interp_helpers import alloc, axis, barrier, launch, prim


def shfl(value, lane, width, warp_size, mask, down=True):
    name = "tir.tvm_warp_shuffle_down" if down else "tir.tvm_warp_shuffle"
    c = loom.const
    m = mask if isinstance(mask, loom.ir.PrimExpr) else c(mask, "uint32")
    return Call(value.dtype, Op.get(name), [m, value, c(lane), c(width), c(warp_size)])


def block_kernel(nx, ny, body_of, y_outside=True):
    """A block of nx x ny threads; ``body_of(hw, X, Y)`` gives the body, ``hw`` the linear index (x fastest)."""
    X = loom.decl_buffer((nx * ny,), "float32", name="X")
    Y = loom.decl_buffer((nx * ny,), "float32", name="Y")
    tx, ty = axis("threadIdx.x"), axis("threadIdx.y")
    body = body_of(tx.var + ty.var * nx, X, Y)
    nest = launch(ty, ny, launch(tx, nx, body)) if y_outside else launch(tx, nx, launch(ty, ny, body))
    return prim(nest, X, Y, name="kern")


def run(f, n):
    x = np.arange(n, dtype="float32") * 10
    y = np.full(n, -1, "float32")
    evaluate(f, x, y)
    return x, y


def expected(x, ws, width, lane, down=True, nthreads=None):
    out = np.empty_like(x)
    for hw in range(len(x)):
        ln = hw % ws
        start = ln - ln % width
        if down:
            src = ln + lane if ln + lane < start + width else ln
        else:
            src = start + lane % width
        out[hw] = x[hw - ln + src]
    return out


@pytest.mark.parametrize("y_outside", [True, False])
@pytest.mark.parametrize("ws, width, delta", [(16, 8, 3), (32, 32, 1), (16, 16, 8), (8, 2, 1)])
def test_shuffle_down_within_segments(ws, width, delta, y_outside):
    """Lanes count threadIdx.x fastest whatever the nesting; past a segment's end a lane keeps its own value."""
    f = block_kernel(8, 4, lambda hw, X, Y: BufferStore(Y, shfl(X[hw], delta, width, ws, (1 << ws) - 1), [hw]),
                     y_outside)
    x, y = run(f, 32)
    np.testing.assert_array_equal(y, expected(x, ws, width, delta))


@pytest.mark.parametrize("width, src", [(4, 1), (4, 5), (16, 0), (8, 7)])
def test_shuffle_reads_a_lane_of_its_segment(width, src):
    f = block_kernel(16, 2, lambda hw, X, Y: BufferStore(Y, shfl(X[hw], src, width, 16, 0xFFFF, down=False), [hw]))
    x, y = run(f, 32)
    np.testing.assert_array_equal(y, expected(x, 16, width, src, down=False))


def test_a_partial_last_warp_shuffles_with_a_mask_of_its_own_lanes():
    """20 threads, warps of 16: the second warp has 4 lanes and names only those."""
    def body(hw, X, Y):
        mask = loom.ir.Select(hw < 16, loom.const(0xFFFF, "uint32"), loom.const(0xF, "uint32"))
        return BufferStore(Y, shfl(X[hw], 2, 4, 16, mask), [hw])

    x, y = run(block_kernel(20, 1, body), 20)
    np.testing.assert_array_equal(y, expected(x, 16, 4, 2))


def test_integer_and_double_values_shuffle_unchanged():
    X = loom.decl_buffer((8,), "int64", name="X")
    Y = loom.decl_buffer((8,), "float64", name="Y")
    tx = axis("threadIdx.x")
    t = tx.var
    body = seq(BufferStore(X, shfl(X[t], 1, 8, 8, 0xFF), [t]), BufferStore(Y, shfl(Y[t], 4, 8, 8, 0xFF), [t]))
    x, y = np.arange(8, dtype="int64") << 40, np.linspace(0, 1, 8)
    ex, ey = expected(x, 8, 8, 1), expected(y, 8, 8, 4)
    evaluate(prim(launch(tx, 8, body), X, Y), x, y)
    np.testing.assert_array_equal(x, ex)
    np.testing.assert_array_equal(y, ey)


def test_one_warp_shuffles_while_the_other_does_not():
    """A shuffle waits for the lanes of its mask only: warp 1 skipping it is no divergence."""
    def body(hw, X, Y):
        return IfThenElse(hw < 16, BufferStore(Y, shfl(X[hw], 1, 16, 16, 0xFFFF), [hw]), BufferStore(Y, X[hw], [hw]))

    x, y = run(block_kernel(32, 1, body), 32)
    np.testing.assert_array_equal(y[:16], expected(x[:16], 16, 16, 1))
    np.testing.assert_array_equal(y[16:], x[16:])


def test_shuffles_and_barriers_interleave():
    S = loom.decl_buffer((16,), "float32", name="S", scope="shared")

    def body(hw, X, Y):
        return alloc(S, seq(BufferStore(S, shfl(X[hw], 1, 8, 8, 0xFF), [hw]), barrier(),
                            BufferStore(Y, shfl(S[15 - hw], 2, 8, 8, 0xFF), [hw])))

    x, y = run(block_kernel(16, 1, body), 16)
    np.testing.assert_array_equal(y, expected(expected(x, 8, 8, 1)[::-1].copy(), 8, 8, 2))


def test_a_lane_that_exits_before_the_shuffle_is_a_divergent_warp():
    f = block_kernel(8, 1, lambda hw, X, Y: IfThenElse(hw < 4, BufferStore(Y, shfl(X[hw], 1, 8, 8, 0xFF), [hw])))
    with pytest.raises(BarrierError, match=r"kern: divergent warp 0 in the only block: 4 threads \(threadIdx.x=4,"
                                           r".* finished without reaching warp shuffle #0 .*tvm_warp_shuffle_down"):
        run(f, 8)


def test_lanes_at_different_shuffles_diverge():
    def body(hw, X, Y):
        return IfThenElse(hw < 4, BufferStore(Y, shfl(X[hw], 1, 8, 8, 0xFF), [hw]),
                          BufferStore(Y, shfl(X[hw], 2, 8, 8, 0xFF), [hw]))

    with pytest.raises(BarrierError, match=r"kern: divergent warp in the only block: 4 threads .* wait at warp "
                                           r"shuffle #\d .* but 4 lane\(s\) of its mask never come: .*waits at warp "
                                           r"shuffle #\d"):
        run(block_kernel(8, 1, body), 8)


@pytest.mark.parametrize("mask, width, match", [
    (0x1FF, 8, "names lanes past the 8 lane"),
    (0xFE, 8, "does not name the caller's own lane 0"),
    (0xFF, 3, "width must be a power of two"),
    (0xFF, 16, "width must be a power of two from 1 to the warp size 8"),
    (0x0F, 8, "reads lane 4 .* which its mask 0xf does not name"),
])
def test_operands_cuda_leaves_undefined_are_errors(mask, width, match):
    def body(hw, X, Y):
        m = loom.ir.Select(hw == 0, loom.const(mask, "uint32"), loom.const(0xFF, "uint32")) if mask == 0xFE \
            else loom.const(mask, "uint32")
        if mask == 0x0F:
            return IfThenElse(hw < 4, BufferStore(Y, shfl(X[hw], 4, width, 8, m, down=False), [hw]))
        return BufferStore(Y, shfl(X[hw], 1, width, 8, m), [hw])

    with pytest.raises(InterpreterError, match=match):
        run(block_kernel(8, 1, body), 8)


def test_a_shuffle_is_no_memory_barrier():
    S = loom.decl_buffer((8,), "float32", name="S", scope="shared")

    def body(hw, X, Y):
        return alloc(S, seq(BufferStore(S, X[hw], [hw]), BufferStore(Y, shfl(X[hw], 1, 8, 8, 0xFF), [hw]),
                            BufferStore(Y, S[7 - hw], [hw])))

    with pytest.raises(RaceError, match="race on shared memory S"):
        run(block_kernel(8, 1, body), 8)


def test_a_shuffle_outside_a_launch_is_refused():
    X = loom.decl_buffer((1,), "float32", name="X")
    f = prim(BufferStore(X, shfl(X[0], 1, 8, 8, 0xFF), [0]), X, name="kern")
    with pytest.raises(InterpreterError, match="kern: tir.tvm_warp_shuffle_down outside a launch region"):
        evaluate(f, np.zeros(1, "float32"))
