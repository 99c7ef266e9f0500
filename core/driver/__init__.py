"""The driver: ``lower``, ``build`` and ``build_config``.

>>> import loom
>>> with loom.driver.build_config(offset_factor=4) as cfg:
...     cfg.get_config("tir.offset_factor")
4
"""

from .build import build, is_lowered
from .build_config import BUILD_CONFIG_OPTIONS, BuildConfig, build_config
from .lower import as_pass, form_prim_func, get_binds, lower, phase_passes
from . import pipeline

__all__ = [
    "lower", "build", "build_config", "BuildConfig", "BUILD_CONFIG_OPTIONS", "get_binds", "form_prim_func",
    "as_pass", "phase_passes", "is_lowered", "pipeline",
]
