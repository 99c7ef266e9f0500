"""The one compiled part of the core: the native per-call fast path (``loom.runtime._fastcall``).

Everything else is in pyproject.toml.  The extension is optional: without a C
compiler the install still succeeds and calls take the pure-Python fast path
(:mod:`loom.runtime.fast_path`), which checks the same things more slowly.
"""

from setuptools import Extension, setup

setup(ext_modules=[Extension("loom.runtime._fastcall", ["core/runtime/_fastcall.c"], optional=True,
                             extra_compile_args=["-O2"])])
