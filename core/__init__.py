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
from .ir.buffer import address_of, prefetch
from .ir.op import register_intrin_rule
from .ir.expr_ops import (
    all, any, cast, const, div, floordiv, floormod, max_value, min_value, select, size_var, truncdiv,
    truncmod, var,
)
from .ir.intrin import (
    abs, call_extern, ceil, cos, erf, exp, exp2, fabs, floor, if_then_else, isnan, likely, log, log2,
    log10, popcount, power, reinterpret, round, rsqrt, sigmoid, sin, sqrt, tanh, trunc,
    call_pure_extern, call_llvm_intrin, call_llvm_pure_intrin, call_packed, call_intrin, call_pure_intrin,
)
from .ir.fast_math import fast_erf, fast_exp, fast_log, fast_sigmoid, fast_tanh
from .ir.bitwise import bitwise_and, bitwise_not, bitwise_or, bitwise_xor, shift_left, shift_right
from .ir.structural import assert_structural_equal, structural_equal, structural_hash
from .ir.serialize import load_json, save_json
from .ir.verify import is_well_formed, verify_well_formed
from .te import create_schedule, comm_reducer, compute, extern, max, min, placeholder, reduce_axis, scan, sum, thread_axis  # noqa: A004
from .te import decl_tensor_intrin, tag_scope
from .te.data_layout import bijective_layout, layout
from . import envvars, ir, arith, plugins, runtime, target, te, testing, transform, driver, hybrid, schedule, ir_builder
from . import language
from .jit import jit
from .driver import build, build_config, lower
from .runtime import ndarray as nd
from .runtime.registry import get_global_func, list_global_func_names, register_func, remove_global_func
from .target import CompilationConfig, Device, Target, VirtualDevice, cpu, cuda, device
from .target.devices import context, gpu

__version__ = "0.1.0"

__all__ = [
    "LoomError", "LoomTypeError", "LoomValueError", "IRError", "VerifyError", "SerializationError",
    "TargetError", "PluginError",
    "DataType", "Op", "decl_buffer", "address_of", "prefetch", "convert", "register_object",
    "var", "size_var", "const", "cast", "select", "div", "floordiv", "floormod", "truncdiv", "truncmod",
    "min_value", "max_value", "all", "any",
    "exp", "exp2", "log", "log2", "log10", "sqrt", "rsqrt", "sigmoid", "tanh", "sin", "cos", "power",
    "popcount", "floor", "ceil", "round", "trunc", "abs", "fabs", "erf", "isnan", "if_then_else",
    "fast_exp", "fast_log", "fast_tanh", "fast_sigmoid", "fast_erf",
    "reinterpret", "likely", "call_extern", "call_pure_extern", "call_llvm_intrin", "call_llvm_pure_intrin",
    "call_intrin", "call_pure_intrin", "register_intrin_rule", "call_packed", "register_func", "get_global_func", "list_global_func_names", "remove_global_func",
    "shift_left", "shift_right", "bitwise_and", "bitwise_or", "bitwise_xor", "bitwise_not",
    "structural_equal", "structural_hash", "assert_structural_equal", "save_json", "load_json",
    "verify_well_formed", "is_well_formed",
    "create_schedule", "placeholder", "compute", "extern", "scan", "decl_tensor_intrin", "tag_scope", "thread_axis", "reduce_axis", "comm_reducer", "sum", "max", "min",
    "layout", "bijective_layout",
    "lower", "build", "build_config", "nd",
    "ir", "arith", "schedule", "ir_builder", "plugins", "runtime", "target", "te", "testing", "transform", "driver", "hybrid", "Target", "Device", "VirtualDevice", "CompilationConfig",
    "cpu", "cuda", "device", "context", "gpu", "logconfig", "jit", "language", "tune", "autotune", "topi",
]


def __getattr__(name: str) -> object:
    # loom.tune (and its @loom.autotune) and loom.topi load on first use: `import loom` stays quick.
    if name == "topi":
        import importlib

        return importlib.import_module(".topi", __name__)
    if name in ("tune", "autotune"):
        import importlib

        tune = importlib.import_module(".tune", __name__)
        return tune if name == "tune" else importlib.import_module(".tune.autotune", __name__).autotune
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
