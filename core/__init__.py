"""Loom: a Python tensor compiler with pluggable backends.

>>> import loom
>>> n = loom.var("n")
>>> A = loom.decl_buffer((n,), "float32", name="A")
>>> loom.structural_equal(loom.load_json(loom.save_json(A)), A, map_free_vars=True)
True
"""

from __future__ import annotations

from . import logconfig  # first: the "loom" logger's NullHandler and LOOM_LOG_LEVEL
from .errors import (
    IRError, LoomError, LoomTypeError, LoomValueError, PluginError, SerializationError, TargetError,
    VerifyError,
)
from .ir import DataType, Op, decl_buffer, convert, register_object
from .ir.expr_ops import (
    all, any, cast, const, floordiv, floormod, max_value, min_value, select, size_var, truncdiv,
    truncmod, var,
)
from .ir.intrin import (
    abs, call_extern, ceil, cos, erf, exp, exp2, fabs, floor, if_then_else, isnan, likely, log, log2,
    log10, popcount, power, reinterpret, round, rsqrt, sigmoid, sin, sqrt, tanh, trunc,
)
from .ir.bitwise import bitwise_and, bitwise_not, bitwise_or, bitwise_xor, shift_left, shift_right
from .ir.structural import assert_structural_equal, structural_equal, structural_hash
from .ir.serialize import load_json, save_json
from .ir.verify import is_well_formed, verify_well_formed
from .te import create_schedule, comm_reducer, compute, extern, max, min, placeholder, reduce_axis, sum, thread_axis  # noqa: A004
from . import envvars, ir, arith, plugins, runtime, target, te, testing, transform, driver, hybrid
from .driver import build, build_config, lower
from .runtime import ndarray as nd
from .target import CompilationConfig, Device, Target, VirtualDevice, cpu, cuda, device

__version__ = "0.1.0"

__all__ = [
    "LoomError", "LoomTypeError", "LoomValueError", "IRError", "VerifyError", "SerializationError",
    "TargetError", "PluginError",
    "DataType", "Op", "decl_buffer", "convert", "register_object",
    "var", "size_var", "const", "cast", "select", "floordiv", "floormod", "truncdiv", "truncmod",
    "min_value", "max_value", "all", "any",
    "exp", "exp2", "log", "log2", "log10", "sqrt", "rsqrt", "sigmoid", "tanh", "sin", "cos", "power",
    "popcount", "floor", "ceil", "round", "trunc", "abs", "fabs", "erf", "isnan", "if_then_else",
    "reinterpret", "likely", "call_extern",
    "shift_left", "shift_right", "bitwise_and", "bitwise_or", "bitwise_xor", "bitwise_not",
    "structural_equal", "structural_hash", "assert_structural_equal", "save_json", "load_json",
    "verify_well_formed", "is_well_formed",
    "create_schedule", "placeholder", "compute", "extern", "thread_axis", "reduce_axis", "comm_reducer", "sum", "max", "min",
    "lower", "build", "build_config", "nd",
    "ir", "arith", "plugins", "runtime", "target", "te", "testing", "transform", "driver", "hybrid", "Target", "Device", "VirtualDevice", "CompilationConfig",
    "cpu", "cuda", "device", "logconfig",
]
