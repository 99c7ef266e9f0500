"""The compiled parts of the core; everything else is in pyproject.toml.

* ``loom.runtime._fastcall``: the native per-call fast path;
* ``loom.driver._tree_state``: the walk over Loom's source files that keys the build cache.

Both are optional: without a C compiler the install still succeeds, calls take
the pure-Python fast path (:mod:`loom.runtime.fast_path`), which checks the same
things more slowly, and the build cache walks the files in Python.
"""

from setuptools import Extension, setup

setup(ext_modules=[Extension("loom.runtime._fastcall", ["core/runtime/_fastcall.c"], optional=True,
                             extra_compile_args=["-O2"]),
                   Extension("loom.driver._tree_state", ["core/driver/_tree_state.c"], optional=True,
                             extra_compile_args=["-O2", "-pthread"], extra_link_args=["-pthread"])])
