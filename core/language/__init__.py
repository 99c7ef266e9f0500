"""``import loom.language as T``: the annotations and keywords of ``@loom.jit`` kernels (seed 001).

Annotations (how a kernel argument is read; :mod:`loom.language.annot`):

* ``T.Tensor[(M, "N"), "float32"]``: a compact tensor; an int is a fixed size,
  a name a runtime size shared by name across arguments (or the value of the
  static parameter of that name); leave out the dtype or the shape
  (``T.Tensor``) to take them from the argument, as static parts of the key;
* ``T.StridedTensor[(M, N), ("s0", 1), "float32"]``: any strides (in elements);
* ``T.Buffer((128,), T.float32)``: exactly that buffer;
* ``T.dyn[int32]``, ``T.dyn["N"]``, ``T.dyn[int64, "N"]``: a runtime scalar;
* ``T.dtype``: a dtype, compiled in (str, numpy, Loom or torch dtypes);
* plain Python values (``BLOCK: int = 32``, or no annotation): compiled in.

Keywords (statements of the kernel body, the hybrid-script language): loops
``T.serial``, ``T.parallel``, ``T.vectorized``, ``T.unroll``,
``T.thread_binding(n, thread="threadIdx.x")``, ``T.grid(m, n)``; on-chip memory
``T.alloc_shared``, ``T.alloc_local``, ``T.alloc_fragment``; math ``T.exp``...;
casts ``T.float32(x)``, ``T.cast(x, dtype)``.

>>> import numpy as np
>>> import loom
>>> import loom.language as T
>>> @loom.jit(target="interp")
... def scale(A: T.Tensor[("N",), "float32"], B: T.Tensor[("N",), "float32"], k: float):
...     for i in T.serial(A.shape[0]):
...         B[i] = A[i] * k
>>> b = np.zeros(3, "float32")
>>> scale(np.arange(3, dtype="float32"), b, 2.0); b
array([0., 2., 4.], dtype=float32)
"""

from .annot import (
    Annot, ArgVarTable, Buffer, BufferAnnot, DTypeAnnot, DynAnnot, FragmentBufferAnnot, LocalBufferAnnot,
    SharedBufferAnnot, StridedTensorAnnot, TensorAnnot, TIRAnnot, Value,
)
from .dtypes import DTYPE_NAMES, dtype_constant, normalize_dtype
from .func_annot import FuncAnnot
from .keywords import (
    KEYWORDS, Keyword, abs, alloc_fragment, alloc_local, alloc_shared, cast, ceil, exp, floor, grid, likely, log,
    max, min, parallel, power, serial, sigmoid, sqrt, tanh, thread_binding, unroll, vectorized,
)

#: ``T.Tensor[...]``: a compact tensor argument.
Tensor = TensorAnnot()
#: ``T.StridedTensor[...]``: a tensor argument with any strides.
StridedTensor = StridedTensorAnnot()
#: ``T.FragmentBuffer`` / ``T.SharedBuffer`` / ``T.LocalBuffer``: on-chip buffers of helpers.
FragmentBuffer = FragmentBufferAnnot()
SharedBuffer = SharedBufferAnnot()
LocalBuffer = LocalBufferAnnot()
#: ``T.dyn[...]``: a runtime scalar argument.
dyn = DynAnnot()
#: ``T.dtype``: a dtype argument, compiled in.
dtype = DTypeAnnot()

bool = dtype_constant("bool")  # noqa: A001 - T.bool, as TVMScript spells it
int8, int16, int32, int64 = (dtype_constant(f"int{b}") for b in (8, 16, 32, 64))
uint8, uint16, uint32, uint64 = (dtype_constant(f"uint{b}") for b in (8, 16, 32, 64))
float16, float32, float64 = (dtype_constant(f"float{b}") for b in (16, 32, 64))
bfloat16 = dtype_constant("bfloat16")

__all__ = [
    "Annot", "ArgVarTable", "Value", "BufferAnnot", "TensorAnnot", "StridedTensorAnnot", "FragmentBufferAnnot",
    "SharedBufferAnnot", "LocalBufferAnnot", "DynAnnot", "DTypeAnnot", "TIRAnnot", "Buffer", "FuncAnnot",
    "Tensor", "StridedTensor", "FragmentBuffer", "SharedBuffer", "LocalBuffer", "dyn", "dtype",
    "normalize_dtype", "dtype_constant", "DTYPE_NAMES", "Keyword", "KEYWORDS",
    "serial", "parallel", "vectorized", "unroll", "thread_binding", "grid", "alloc_shared", "alloc_local",
    "alloc_fragment", "exp", "log", "sqrt", "tanh", "sigmoid", "floor", "ceil", "power", "abs", "max", "min",
    "likely", "cast", *DTYPE_NAMES,
]
