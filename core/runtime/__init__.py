"""The runtime: built modules, their argument checks, and device arrays (``loom.nd``).

>>> import loom
>>> loom.runtime.ndarray.empty((2, 2), "float32").device
cpu(0)
"""

from . import ndarray
from .arguments import ArgumentChecker, ArgumentError, ArgumentTypeError, ArgumentValueError, BoundCall
from .interp_module import InterpModule
from .module import Module, PackedFunc, ProfileResult, load_module, read_export
from .native_library import LibraryModule, configured_num_threads
from .ndarray import NDArray

nd = ndarray

__all__ = [
    "Module", "PackedFunc", "ProfileResult", "load_module", "read_export", "InterpModule",
    "ArgumentChecker", "BoundCall", "ArgumentError", "ArgumentTypeError", "ArgumentValueError",
    "NDArray", "ndarray", "nd", "LibraryModule", "configured_num_threads",
]
