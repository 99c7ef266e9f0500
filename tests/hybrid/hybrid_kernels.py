"""Hybrid kernels shared by the hybrid tests: each runs emulated and compiled.

``CASES`` lists, per kernel, how to make its numpy arguments and its Loom
arguments (placeholders, sizes, containers).
"""
# ruff: noqa: F821, F841 - hybrid keywords (output_tensor, range kinds, math) are injected, not imported

import numpy as np

import loom
from loom.hybrid import script


@script
def outer_product(a, b, c):
    c = output_tensor((a.shape[0], b.shape[0]), 'float32')
    for i in range(a.shape[0]):
        for j in range(b.shape[0]):
            c[i, j] = a[i] * b[j]
    return c


@script
def loop_kinds(a):
    b = output_tensor(a.shape, a.dtype)
    for i in parallel(a.shape[0]):
        for j in serial(a.shape[1]):
            b[i, j] = a[i, j] + 1.0
        for j in unroll(2):
            b[i, j] = b[i, j] * 2.0
        for j in vectorize(4):
            b[i, j + 4] = b[i, j + 4] - a[i, j]
    return b


@script
def triangle(a):
    """A loop starting above zero, and a loop whose extent is the outer loop variable."""
    b = output_tensor(a.shape, a.dtype)
    for i in range(1, a.shape[0]):
        for j in range(i):
            b[i, j] = a[i, j] + a[j, i]
    return b


@script
def prefix_sum(a):
    """Two passes through global scratch space, and a mutable variable carried along a loop."""
    b = output_tensor(a.shape, a.dtype)
    tmp = allocate(a.shape, a.dtype)
    s = 0.0
    for i in range(a.shape[0]):
        s += a[i]
        tmp[i] = s
    for i in range(a.shape[0]):
        b[i] = tmp[i] - a[0]
    return b


@script
def local_scratch(a):
    """Per-row scratch in local and shared scopes, declared inside the loop."""
    b = output_tensor((a.shape[0],), a.dtype)
    for i in range(a.shape[0]):
        row = allocate((4,), a.dtype, "local")
        acc = allocate((1,), a.dtype, "shared")
        acc[0] = 0.0
        for j in range(4):
            row[j] = a[i, j] * a[i, j]
        for j in range(4):
            acc[0] += row[j]
        b[i] = acc[0]
    return b


@script
def add_offsets(a, offsets):
    """A container indexed by a const_range loop variable."""
    b = output_tensor(a.shape, a.dtype)
    for k in const_range(len(offsets)):
        for i in range(a.shape[1]):
            b[k, i] = a[k, i] + offsets[k]
    return b


@script
def classify(a):
    """Nested conditions: if/elif/else, and/or/not, True/False and the conditional expression."""
    b = output_tensor(a.shape, "int32")
    for i in range(a.shape[0]):
        if a[i] > 1.0 and not a[i] > 2.0:
            b[i] = 1
        elif a[i] < -1.0 or a[i] == 0.0:
            if a[i] < -2.0:
                b[i] = -2
            else:
                b[i] = -1
        else:
            b[i] = 5 if a[i] > 0.0 else 7
        if True and i % 2 == 0:
            b[i] = b[i] * 10
        if False:
            b[i] = 999
    return b


@script
def math_keywords(a):
    b = output_tensor((11, a.shape[0]), a.dtype)
    for i in range(a.shape[0]):
        x = abs(a[i]) + 0.5
        b[0, i] = log(x)
        b[1, i] = exp(a[i])
        b[2, i] = sigmoid(a[i])
        b[3, i] = tanh(a[i])
        b[4, i] = power(x, 1.5)
        b[5, i] = sqrt(x)
        b[6, i] = floor(a[i])
        b[7, i] = ceil(a[i])
        b[8, i] = min(a[i], 0.25, x)
        b[9, i] = max(a[i], -0.25)
        b[10, i] = x ** 3
    return b


@script
def bit_counts(a):
    b = output_tensor(a.shape, a.dtype)
    for i in range(a.shape[0]):
        b[i] = popcount(a[i]) + a[i] // 3 + a[i] % 5
    return b


@script
def min_max(a):
    """Several outputs (a list of tensors when compiled, a tuple of arrays when emulated)."""
    lo = output_tensor((a.shape[0],), a.dtype)
    hi = output_tensor((a.shape[0],), a.dtype)
    for i in range(a.shape[0]):
        lo[i] = a[i, 0]
        hi[i] = a[i, 0]
        for j in range(1, a.shape[1]):
            lo[i] = min(lo[i], a[i, j])
            hi[i] = max(hi[i], a[i, j])
    return lo, hi


@script
def row_sums(a):
    """A variable declared in the outer loop, updated in the inner one."""
    b = output_tensor((a.shape[0],), a.dtype)
    for i in range(a.shape[0]):
        s = 0.0
        for j in range(a.shape[1]):
            s += a[i, j]
        b[i] = s
    return b


@script
def square(a):
    b = output_tensor(a.shape, a.dtype)
    for i in range(a.shape[0]):
        b[i] = a[i] * a[i]
    return b


@script
def sum_of_squares(a, b):
    """Calls of another hybrid function are inlined."""
    sa = square(a)
    sb = square(b)
    c = output_tensor(a.shape, a.dtype)
    for i in range(a.shape[0]):
        c[i] = sa[i] + sb[i]
    return c


@script
def matmul(a, b):
    c = output_tensor((a.shape[0], b.shape[1]), a.dtype)
    for i in range(a.shape[0]):
        for j in range(b.shape[1]):
            c[i, j] = 0.0
            for k in range(a.shape[1]):
                c[i, j] += a[i, k] * b[k, j]
    return c


@script
def add_one_2d(a):
    b = output_tensor(a.shape, a.dtype)
    for i in range(a.shape[0]):
        for j in range(a.shape[1]):
            b[i, j] = a[i, j] + 1.0
    return b


@script
def threads(a):
    """bind: the loop runs as a thread axis (on a CPU target, one thread after another)."""
    b = output_tensor(a.shape, a.dtype)
    for tx in bind("threadIdx.x", a.shape[0]):
        b[tx] = a[tx] * 3.0
    return b


@script
def scaled(a, n, k):
    """A symbolic size and a scalar argument, an assertion, and int/float casts."""
    b = output_tensor((n,), a.dtype)
    assert n > 0, "n must be positive"
    for i in range(n):
        b[i] = a[i] * k + float32(i // 2) + float32(int32(a[i]))
    return b


@script
def reverse(a):
    """A value read into a variable before its element is overwritten (a let binding)."""
    b = output_tensor(a.shape, a.dtype)
    for i in range(a.shape[0]):
        b[i] = a[i]
    for i in range(a.shape[0] // 2):
        x = b[i]
        b[i] = b[a.shape[0] - 1 - i]
        b[a.shape[0] - 1 - i] = x
    return b


@script
def first_square(a):
    """The callee's output is the caller's output."""
    b = square(a)
    return b


# ---------------------------------------------------------------------------
# cases: numpy arguments, and how to turn them into Loom arguments


def _rng():
    return np.random.default_rng(7)


def _f32(*shape):
    return _rng().standard_normal(shape).astype("float32")


def mirror(np_args):
    """Loom arguments mirroring numpy ones: arrays become placeholders, lists containers, numbers stay."""
    out = []
    for k, a in enumerate(np_args):
        if isinstance(a, np.ndarray):
            out.append(loom.placeholder(a.shape, str(a.dtype), name=f"arg{k}"))
        elif isinstance(a, list):
            out.append(loom.convert(a))
        else:
            out.append(a)
    return out


def _symbolic_scaled(np_args):
    n = loom.var("n")
    return [loom.placeholder((n,), name="a"), n, loom.var("k", "float32")]


#: name -> (kernel, numpy arguments, Loom arguments from the numpy ones)
CASES = {
    "outer_product": (outer_product, lambda: [_f32(10), _f32(9)], mirror),
    "loop_kinds": (loop_kinds, lambda: [_f32(5, 8)], mirror),
    "triangle": (triangle, lambda: [_f32(6, 6)], mirror),
    "prefix_sum": (prefix_sum, lambda: [_f32(7)], mirror),
    "local_scratch": (local_scratch, lambda: [_f32(5, 4)], mirror),
    "add_offsets": (add_offsets, lambda: [_f32(3, 5), [1.5, -2.0, 3.0]], mirror),
    "classify": (classify, lambda: [np.array([1.5, 2.5, -1.5, -2.5, 0.0, 0.5, -0.5, 3.0], "float32")], mirror),
    "math_keywords": (math_keywords, lambda: [_f32(9)], mirror),
    "bit_counts": (bit_counts, lambda: [_rng().integers(-50, 50, 12).astype("int32")], mirror),
    "min_max": (min_max, lambda: [_f32(4, 6)], mirror),
    "row_sums": (row_sums, lambda: [_f32(4, 6)], mirror),
    "sum_of_squares": (sum_of_squares, lambda: [_f32(5), _f32(5)], mirror),
    "first_square": (first_square, lambda: [_f32(5)], mirror),
    "reverse": (reverse, lambda: [_f32(7)], mirror),
    "matmul": (matmul, lambda: [_f32(4, 5), _f32(5, 3)], mirror),
    "scaled_symbolic": (scaled, lambda: [_f32(9), 9, 1.5], _symbolic_scaled),
    "scaled_constant": (scaled, lambda: [_f32(6), 6, -0.5], mirror),
}
