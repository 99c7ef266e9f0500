"""loom-llvm: the LLVM CPU backend of Loom (target kind ``llvm``).

The plugin module :mod:`loom_llvm.plugin` is found through the ``loom`` entry
point; llvmlite is imported only when an ``llvm`` target is created.
"""

__version__ = "0.1.0"
