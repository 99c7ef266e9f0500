"""``loom.build_config``: the classic front of :class:`~loom.transform.PassContext`.

``build_config(auto_unroll_max_step=16)`` is a PassContext whose config holds
``{"tir.auto_unroll_max_step": 16}``; passes read their options from the current
context when they run, so the option takes effect for every ``lower``/``build``
inside the ``with`` block.

Nesting: an inner ``build_config`` inherits, when it is entered, every option of
the enclosing context that it does not set itself; leaving it makes the outer
configuration current again, unchanged.

>>> import loom
>>> from loom.driver import build_config
>>> with build_config(auto_unroll_max_step=16) as outer:
...     with build_config(unroll_explicit=False) as inner:
...         inner.get_config("tir.auto_unroll_max_step"), inner.get_config("tir.unroll_explicit")
...     loom.transform.PassContext.current() is outer
(16, False)
True
"""

from __future__ import annotations

import numbers
from typing import Any, Callable

from ..errors import LoomTypeError, LoomValueError
from ..transform.pass_base import Pass, PassContext, list_config_options, register_config_option

__all__ = ["build_config", "BuildConfig", "BUILD_CONFIG_OPTIONS", "check_lower_passes", "MAX_PHASE"]

register_config_option("tir.dump_pass_ir_dir", str, ".",
                       "the folder dump_pass_ir writes its numbered IR files into")

#: The options ``build_config`` accepts (seed 003's, the three extra ones, and the dump folder).
BUILD_CONFIG_OPTIONS: tuple[str, ...] = (
    "auto_unroll_max_step", "auto_unroll_max_depth", "auto_unroll_max_extent", "unroll_explicit",
    "detect_global_barrier", "partition_const_loop", "data_alignment", "offset_factor", "restricted_func",
    "double_buffer_split_loop", "add_lower_pass", "dump_pass_ir", "dump_pass_ir_dir", "disable_vectorize",
    "instrument_bound_checkers",
)

#: The last lowering phase; ``add_lower_pass`` phases above it run in it (as classic TVM did).
MAX_PHASE = 3

LowerPass = Pass | Callable[[Any], Any]


def check_lower_passes(items: Any) -> list[tuple[int, LowerPass]]:
    """Validate ``add_lower_pass`` entries; return them as ``[(phase, pass)]`` with phase clamped to 0..3.

    A phase must be a non-negative int (negative phases are an error, never
    silently dropped); a pass must be a :class:`Pass` or a ``Stmt -> Stmt`` callable.
    """
    if not isinstance(items, (list, tuple)):
        raise LoomTypeError(f"add_lower_pass expects a list of (phase, pass) pairs, got {type(items).__name__}")
    out: list[tuple[int, LowerPass]] = []
    for k, item in enumerate(items):
        if not isinstance(item, (list, tuple)) or len(item) != 2:
            raise LoomTypeError(f"add_lower_pass[{k}] must be a (phase, pass) pair, got {item!r}")
        phase, fn = item
        if isinstance(phase, bool) or not isinstance(phase, numbers.Integral):
            raise LoomTypeError(f"add_lower_pass[{k}]: the phase must be an int 0-3, got {phase!r}")
        if phase < 0:
            raise LoomValueError(f"add_lower_pass[{k}]: phase {phase} is negative; phases are 0 (right after "
                                 f"the schedule becomes IR) to {MAX_PHASE} (before the API is made)")
        if not isinstance(fn, Pass) and not callable(fn):
            raise LoomTypeError(f"add_lower_pass[{k}]: expected a Pass or a Stmt -> Stmt callable, "
                                f"got {type(fn).__name__}")
        out.append((min(int(phase), MAX_PHASE), fn))
    return out


class BuildConfig(PassContext):
    """A PassContext from :func:`build_config` options; inherits the outer options on entry."""

    def __init__(self, options: dict[str, Any]) -> None:
        super().__init__(config=options)
        self.explicit = dict(self.config)

    def __enter__(self) -> PassContext:
        outer = PassContext.current()
        # Inherit what the enclosing context says, unless set here.  Its
        # instruments are already entered, so they are attached only afterwards.
        self.config = {**outer.config, **self.explicit}
        self.opt_level = outer.opt_level
        self.required_pass, self.disabled_pass = outer.required_pass, outer.disabled_pass
        self.instruments = []
        super().__enter__()
        self.instruments = list(outer.instruments)
        return self

    def __exit__(self, *exc: Any) -> None:
        self.instruments = []
        super().__exit__(*exc)
        self.config = dict(self.explicit)

    def __repr__(self) -> str:
        shown = ", ".join(f"{k.removeprefix('tir.')}={v!r}" for k, v in self.explicit.items())
        return f"build_config({shown})"


def build_config(**options: Any) -> BuildConfig:
    """Configure lowering and building; use it as ``with loom.build_config(...):``.

    Options (seed 003 defaults): ``auto_unroll_max_step=0``, ``auto_unroll_max_depth=8``,
    ``auto_unroll_max_extent=0``, ``unroll_explicit=True``, ``detect_global_barrier=True``,
    ``partition_const_loop=False``, ``data_alignment=-1`` (64 bytes), ``offset_factor=0``,
    ``restricted_func=True``, ``double_buffer_split_loop=2``, ``add_lower_pass=[(phase, pass)]``,
    ``dump_pass_ir=False`` (with ``dump_pass_ir_dir="."``), ``disable_vectorize=False``,
    ``instrument_bound_checkers=False``.  Each is stored as ``"tir.<option>"`` in the
    context's config.  An unknown option is a :class:`~loom.errors.LoomValueError`
    listing the valid ones.

    ``add_lower_pass`` entries are ``(phase, pass)`` where ``pass`` is a ``Pass`` or a
    classic ``Stmt -> Stmt`` function; phase 0 runs right after the schedule becomes
    IR, 1 after storage flattening, 2 after the loop transformations, 3 before the
    API is made (phases above 3 run in phase 3; negative phases are an error).

    >>> cfg = build_config(partition_const_loop=True)
    >>> cfg.config["tir.partition_const_loop"]
    True
    >>> build_config(unroll=4)
    Traceback (most recent call last):
    ...
    loom.errors.LoomValueError: unknown build_config option 'unroll'; valid options: ...
    """
    config: dict[str, Any] = {}
    known = list_config_options()
    for name, val in options.items():
        if name not in BUILD_CONFIG_OPTIONS:
            raise LoomValueError(f"unknown build_config option {name!r}; valid options: "
                                 f"{', '.join(sorted(BUILD_CONFIG_OPTIONS))}")
        key = f"tir.{name}"
        if name == "add_lower_pass":
            val = tuple(check_lower_passes([] if val is None else val))
        if name == "data_alignment" and isinstance(val, int) and val != -1 and (val <= 0 or val & (val - 1)):
            raise LoomValueError(f"data_alignment must be -1 or a positive power of two (bytes), got {val}")
        if name in ("offset_factor", "auto_unroll_max_step", "auto_unroll_max_depth", "auto_unroll_max_extent",
                    "double_buffer_split_loop") and isinstance(val, int) and not isinstance(val, bool) and val < 0:
            raise LoomValueError(f"{name} must be >= 0, got {val}")
        config[key] = known[key].check(val)
    return BuildConfig(config)
