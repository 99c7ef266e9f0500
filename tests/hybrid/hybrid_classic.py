"""The harness of the classic-API hybrid tests: emulate, compile, compare, and dump the schedule back.

``run_and_check`` does what the harness of TVM v0.6's hybrid tests does, with Loom
names: it emulates a hybrid function (or module) on numpy arrays, builds its schedule
for a target, runs it and compares every output, and every input too (a script may
write its inputs), then returns the schedule's hybrid module.  ``round_trip`` runs
the module again the same way: its source must parse back to an operation that
computes what the script computes, and its Python must too.
"""

from dataclasses import dataclass

import numpy as np

import loom
from loom.ir import expr as E
from loom.ir.functor import substitute
from loom.arith import Analyzer
from loom.te.tensor import Tensor


@dataclass
class Checked:
    module: loom.hybrid.HybridModule  # the schedule, dumped
    ins: list  # the tensors and variables the module takes
    outs: list  # the output tensors
    expected: list  # the emulated outputs


def value(expr, var_dict):
    """A shape entry as an int, the variables replaced by their values."""
    e = Analyzer().simplify(substitute(expr, {v: loom.const(k, v.dtype) for v, k in var_dict.items()}))
    assert isinstance(e, E.IntImm), f"{expr} is not constant under {var_dict}"
    return e.value


def random_array(rng, shape, dtype):
    if np.dtype(dtype).kind in "iu":
        return rng.integers(0, 16, size=shape).astype(dtype)
    return rng.standard_normal(shape).astype(dtype)


def as_list(x):
    return list(x) if isinstance(x, (list, tuple)) else [x]


def run_and_check(func, args, target, var_dict=None, sch=None, outs=None, seed=0):
    """Emulate ``func`` on random arrays, build the schedule (``func``'s default one unless given) and compare."""
    var_dict = var_dict or {}
    if sch is None:
        outs = as_list(func(*[loom.convert(a) if isinstance(a, list) else a for a in args]))
        sch = loom.create_schedule(outs[0].op)
    rng = np.random.default_rng(seed)
    emu_args, build_args, run_args, pairs = [], [], [], []
    for a in args:
        if isinstance(a, Tensor):
            data = random_array(rng, [value(s, var_dict) for s in a.shape], str(a.dtype))
            emu_args.append(data)
            run_args.append(data.copy())
            build_args.append(a)
            pairs.append((data, run_args[-1]))
        elif isinstance(a, E.Var):
            emu_args.append(var_dict[a])
            run_args.append(var_dict[a])
            build_args.append(a)
        else:
            emu_args.append(np.array(a))  # a constant container: numpy indexes it by tuples too
    f = loom.build(sch, build_args + outs, target=target)
    results = [np.zeros([value(s, var_dict) for s in o.shape], str(o.dtype)) for o in outs]
    f(*run_args, *results)
    expected = as_list(func(*emu_args))
    assert len(expected) == len(results)
    for got, want in zip(results, expected):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    for emulated, compiled in pairs:  # inputs written in place agree too
        np.testing.assert_allclose(compiled, emulated, rtol=1e-5, atol=1e-5)
    return Checked(loom.hybrid.build(sch, build_args, outs), build_args, outs, expected)


def round_trip(func, args, target, var_dict=None, sch=None, outs=None):
    """``run_and_check`` of ``func``, then of the hybrid module of its schedule (same inputs)."""
    first = run_and_check(func, args, target, var_dict, sch, outs)
    again = run_and_check(first.module, first.ins, target, var_dict)
    for a, b in zip(first.expected, again.expected):  # the module's Python computes what the script does
        np.testing.assert_allclose(b, a, rtol=1e-5, atol=1e-5)
    return first, again
