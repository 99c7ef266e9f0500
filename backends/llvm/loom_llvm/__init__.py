"""loom-llvm: the LLVM CPU backend of Loom (target kind ``llvm``).

The plugin module :mod:`loom_llvm.plugin` is found through the ``loom`` entry
point; llvmlite is imported only when an ``llvm`` target is created.
"""

__version__ = "0.1.0"


def llvm_version_major() -> int:
    """The major version of the LLVM this backend compiles with (llvmlite's), as TVM's
    ``tvm.codegen.llvm_version_major``.

    >>> import loom_llvm
    >>> loom_llvm.llvm_version_major() >= 11
    True
    """
    import llvmlite.binding as llvm

    return int(llvm.llvm_version_info[0])
