"""CUDA C source of lowered device kernels, on the shared C-style renderer.

:class:`CUDARenderer` is the core :class:`loom.codegen.CStyleRenderer` in the
CUDA dialect.  It renders the kernels SplitHostDevice made
(``attrs["calling_conv"] == "device_kernel"``), each as

``extern "C" __global__ void __launch_bounds__(threads) name(float *__restrict__ A, ..., int32_t n)``

* parameters are the kernel's, without its launch parameters (the host passes
  the extents as grid and block sizes); a pointer parameter has the element
  type its loads and stores use, ``__restrict__`` when ``tir.noalias``;
* a ``blockIdx.*``/``threadIdx.*`` binding reads the built-in index (a kernel
  has one extent per tag, so no guard is needed);
* ``shared`` allocations are ``__shared__`` arrays, other scopes arrays of the
  thread; both need a constant size;
* ``tvm_storage_sync("shared")`` is ``__syncthreads()``, ``("warp")``
  ``__syncwarp()``; warp shuffles are ``__shfl_down_sync``/``__shfl_sync``;
* vector values are :data:`VECTOR_TEMPLATE` structs (``loom_vec<float, 4>``)
  computed lane by lane, which nvcc keeps in registers; a unit-stride vector
  load or store whose start is provably a multiple of its lanes is one aligned
  access of the whole vector (``ld.global.v4.f32``), others go through memcpy;
* ``float16`` is ``half`` (cuda_fp16.h) and ``bfloat16`` ``nv_bfloat16``
  (cuda_bf16.h); math on them is computed in float32
  (:mod:`loom_cuda.intrinsic_rules`).

Integer division by zero is not checked (CUDA gives an unspecified value, it
never traps) and a failing assertion inside a kernel stops it with ``__trap()``,
which the runtime reports as a launch failure.

>>> import loom
>>> from loom.ir import AttrStmt, BufferStore, IterVar, PrimFunc
>>> A = loom.decl_buffer((64,), "float32", name="A")
>>> tx = IterVar(None, loom.var("tx"), "thread_index", "threadIdx.x")
>>> body = AttrStmt(tx, "thread_extent", 64, BufferStore(A, A[tx.var] * 2.0, [tx.var]))
>>> k = PrimFunc([A.data], body, attrs={"calling_conv": "device_kernel", "thread_extents": {"threadIdx.x": 64}})
>>> print("\\n".join(CUDARenderer().render_function("double", k)))
extern "C" __global__ void __launch_bounds__(64) double_(float *A) {
  const int32_t tx = (int32_t)(threadIdx.x);
  A[tx] = (A[tx] * 2.0f);
}
"""

from __future__ import annotations

from typing import Any, ClassVar

from loom.arith import Analyzer
from loom.codegen import CodegenError, CStyleRenderer
from loom.ir import expr as E
from loom.ir import stmt as S
from loom.ir.dtype import DataType
from loom.ir.function import IRModule, PrimFunc
from loom.ir.functor import post_order_visit
from loom.runtime.abi import function_symbol

from .intrinsic_rules import DEVICE_MATH, math_rules

__all__ = ["CUDARenderer", "generate", "kernel_symbol", "launch_params", "PREAMBLE", "VECTOR_TEMPLATE"]

_ONE = ("x", "y", "z")

#: A vector of ``N`` lanes of ``T``, aligned like CUDA's own vector types (at most 16 bytes).
VECTOR_TEMPLATE = r"""template <typename T, int N> struct alignas(sizeof(T) * N >= 16 ? 16 : (sizeof(T) * N >= 8 ? 8 :
    (sizeof(T) * N >= 4 ? 4 : sizeof(T)))) loom_vec {
  T v[N];
  __device__ __forceinline__ T &operator[](int i) { return v[i]; }
  __device__ __forceinline__ const T &operator[](int i) const { return v[i]; }
};
"""

#: Headers and device helpers of every CUDA file.
PREAMBLE = r"""#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include <stdint.h>

typedef __half half;
typedef __nv_bfloat16 nv_bfloat16;

__device__ __forceinline__ int64_t loom_floordiv(int64_t a, int64_t b) {
  if (b == -1) return (int64_t)(0ull - (uint64_t)a);
  int64_t q = a / b;
  return (q * b != a && ((a < 0) != (b < 0))) ? q - 1 : q;
}
__device__ __forceinline__ int64_t loom_floormod(int64_t a, int64_t b) {
  if (b == -1) return 0;
  int64_t r = a % b;
  return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r;
}
""" + VECTOR_TEMPLATE


def kernel_symbol(name: str, func: PrimFunc) -> str:
    """The symbol of kernel ``func`` (called ``name`` in its module): :func:`loom.runtime.abi.function_symbol`
    of its ``global_symbol``, so the runtime finds it from the signature alone.

    >>> from loom.ir import PrimFunc, no_op
    >>> kernel_symbol("add_kernel0", PrimFunc([], no_op())), kernel_symbol("expf", PrimFunc([], no_op()))
    ('add_kernel0', 'loom_fn_expf')
    """
    return function_symbol(str(func.attrs.get("global_symbol", name)))


def launch_params(func: PrimFunc) -> tuple[list[E.Var], list[E.Var]]:
    """``(kernel parameters, launch parameters)`` of a kernel: the launch parameters are its last
    ``len(attrs["tir.kernel_launch_params"])`` params (one extent per thread tag)."""
    tags = tuple(func.attrs.get("tir.kernel_launch_params", ()))
    n = len(func.params) - len(tags)
    return list(func.params[:n]), list(func.params[n:])


def _element_types(func: PrimFunc) -> dict[int, DataType]:
    """The element type each pointer is accessed with (the first access's)."""
    out: dict[int, DataType] = {}

    def visit(n: Any) -> None:
        if isinstance(n, (E.BufferLoad, S.BufferStore)):
            out.setdefault(id(n.buffer.data), n.buffer.dtype)

    post_order_visit(func.body, visit)
    return out


def _shuffle(fn: str) -> Any:
    def render(r: CUDARenderer, n: E.Call) -> str:
        mask, value, lane, width = (r.expr(a) for a in n.args[:4])
        return f"{fn}({mask}, {value}, {lane}, {width})"
    return render


def _storage_sync(r: CUDARenderer, n: E.Call) -> str:
    scope = n.args[0].value if n.args and isinstance(n.args[0], E.StringImm) else "shared"
    if scope == "warp":
        return "__syncwarp()"
    if scope == "shared":
        return "__syncthreads()"
    raise CodegenError(f"CUDA kernels cannot synchronize scope {scope!r} (only 'shared' and 'warp'): a "
                       "grid-wide barrier needs a kernel launch of its own")


def _popcount(r: CUDARenderer, n: E.Call) -> str:
    t = n.dtype.element_of()
    fn = "__popcll" if t.bits == 64 else "__popc"
    return r.elementwise(n.dtype, [n.args[0]], lambda a: f"(({r.type_name(t)}){fn}((uint{max(t.bits, 32)}_t){a}))")


def _minmax(sym: str) -> Any:
    return lambda r, n: r.elementwise(n.dtype, [n.a, n.b], lambda a, b: f"({a} {sym} {b} ? {a} : {b})", dup=True)


_CODE_FOR_OP: dict[Any, Any] = {
    **CStyleRenderer.code_for_op,
    E.Min: _minmax("<"), E.Max: _minmax(">"),
    E.Broadcast: lambda r, n: r.elementwise(n.dtype, [n.value], lambda a: a, dup=True),
    "tir.popcount": _popcount,
    "tir.likely": lambda r, n: f"__builtin_expect(!!({r.expr(n.args[0])}), 1)",
    "tir.tvm_storage_sync": _storage_sync,
    "tir.tvm_warp_shuffle_down": _shuffle("__shfl_down_sync"),
    "tir.tvm_warp_shuffle": _shuffle("__shfl_sync"),
    "tir.tvm_warp_activemask": lambda r, n: "__activemask()",
}


class CUDARenderer(CStyleRenderer):
    """The CUDA C dialect (see the module docstring).

    :param fast_math: whether the intrinsic rules lowering what LowerIntrin left use CUDA's fast
        approximate float32 functions (the target's ``-fast_math``).
    """

    banner: ClassVar[str] = "// Generated by loom-cuda."
    preamble: ClassVar[str] = PREAMBLE
    code_for_op: ClassVar[dict[Any, Any]] = _CODE_FOR_OP
    type_map: ClassVar[dict[str, str]] = {**CStyleRenderer.type_map, "float16": "half", "bfloat16": "nv_bfloat16"}
    vector_element: ClassVar[dict[str, str]] = {}
    restrict_keyword: ClassVar[str] = "__restrict__"
    thread_idx: ClassVar[dict[str, str]] = {f"{k}.{d}": f"{k}.{d}" for k in ("blockIdx", "threadIdx") for d in _ONE}
    kernel_prefix: ClassVar[str] = 'extern "C" __global__ '
    header_functions: ClassVar[frozenset[str]] = DEVICE_MATH
    #: The most bytes one vector access moves (CUDA's widest load is 16 bytes).
    vector_access_limit: ClassVar[int] = 16
    #: The alignment the runtime guarantees for argument pointers (cudaMalloc gives 256; views: the checker's 16).
    param_alignment: ClassVar[int] = 16

    def __init__(self, fast_math: bool = False) -> None:
        super().__init__(False, math_rules(fast_math))
        self._analyzer = Analyzer()

    def symbol(self, name: str) -> str:
        return function_symbol(name)

    # -- functions --------------------------------------------------------------

    def function_signature(self, name: str, func: PrimFunc) -> str:
        if func.attrs.get("calling_conv") != "device_kernel":
            raise CodegenError(f"the cuda backend compiles device kernels; {name!r} is not one (it has no "
                               "blockIdx/threadIdx binding; bind its loops, or build it for a CPU target)")
        bounds = self._launch_bounds(func)
        prefix = self.kernel_prefix + ("void " if bounds is None else f"void __launch_bounds__({bounds}) ")
        params, _ = launch_params(func)
        return f"{prefix}{kernel_symbol(name, func)}({', '.join(self._typed(func, params)) or 'void'})"

    def render_function(self, name: str, func: PrimFunc) -> list[str]:
        self._aligned_params: set[int] = {id(p) for p in func.params if p.dtype.is_handle}
        return super().render_function(name, func)

    @staticmethod
    def _launch_bounds(func: PrimFunc) -> int | None:
        """Threads per block when every threadIdx extent is a constant (else no ``__launch_bounds__``)."""
        threads = 1
        for tag, extent in dict(func.attrs.get("thread_extents", {})).items():
            if str(tag).startswith("threadIdx."):
                if not isinstance(extent, E.IntImm):
                    return None
                threads *= extent.value
        return threads

    def _typed(self, func: PrimFunc, params: list[E.Var]) -> list[str]:
        restrict = f"{self.restrict_keyword} " if func.attrs.get("tir.noalias") else ""
        elems = _element_types(func)
        out = []
        for v in params:
            if v.dtype.is_handle:
                t = elems.get(id(v))
                c = self.name(v)
                if t is None:
                    out.append(f"void *{c}")
                else:
                    self._elem[id(v)] = t
                    out.append(f"{self.type_name(t)} *{restrict}{c}")
            else:
                out.append(f"{self.type_name(v.dtype)} {self.name(v)}")
        return out

    def call_global(self, call: E.Call) -> str:
        raise CodegenError(f"a CUDA kernel cannot call the function {call.op.name_hint!r} (kernels launch from "
                           "the host)")

    # -- failures -----------------------------------------------------------------

    def assert_failure(self, message: str) -> str:
        return "__trap();"

    # -- types and literals -----------------------------------------------------------

    def type_name(self, t: DataType) -> str:
        elem = str(t.element_of())
        if t.lanes == 1 or elem not in self.type_map:
            return super().type_name(t)
        name = f"{elem}x{t.lanes}"
        self.typedefs.setdefault(name, f"typedef loom_vec<{self.type_map[elem]}, {t.lanes}> {name};")
        return name

    def _vector_bytes(self, t: DataType, var: str) -> str:
        return f"sizeof {var}"

    def float_literal(self, value: float, t: DataType) -> str:
        if t.bits == 16:
            return f"(({self.type_map[str(t.element_of())]}){super().float_literal(value, DataType('float', 32))})"
        return super().float_literal(value, t)

    def _plain_arith(self, n: E.BinaryOp, sym: str) -> str:
        # No vector arithmetic on the GPU: lane by lane (each thread computes its lanes in registers).
        t = n.dtype
        return self.elementwise(t, [n.a, n.b], lambda a, b: self.wrap(t, f"{a} {sym} {b}"))

    # -- memory -----------------------------------------------------------------

    def _allocate(self, s: S.Allocate) -> None:
        ct, v = self.type_name(s.dtype), self.name(s.buffer_var)
        self._elem[id(s.buffer_var)] = s.dtype
        count = 1
        for x in s.extents:
            if not isinstance(x, E.IntImm):
                raise CodegenError(f"the {s.scope} allocation {s.buffer_var.name} of a CUDA kernel needs a constant "
                                   f"size, got {', '.join(map(str, s.extents))}")
            count *= x.value
        scope = "__shared__ " if s.scope == "shared" or s.scope.startswith("shared.") else ""
        if scope:
            self._aligned_params.add(id(s.buffer_var))
        self.emit(f"{scope}{ct} {v}[{max(count, 1)}] __align__(16);" if scope
                  else f"{ct} {v}[{max(count, 1)}];")
        self.stmt(s.body)

    def _aligned_start(self, buf: Any, indices: tuple[Any, ...], t: DataType) -> str | None:
        """The flat start of a unit-stride vector access of ``t`` that is provably aligned to the vector's
        size (a multiple of its lanes, on a 16-byte aligned pointer), else None."""
        nbytes = t.lanes * t.bits // 8
        if nbytes > self.vector_access_limit or nbytes & (nbytes - 1) or len(indices) != 1 \
                or id(buf.data) not in self._aligned_params or buf.dtype != t.element_of():
            return None
        ramp = indices[0]
        if not isinstance(ramp, E.Ramp) or not (isinstance(ramp.stride, E.IntImm) and ramp.stride.value == 1):
            return None
        start = ramp.base if isinstance(buf.elem_offset, E.IntImm) and buf.elem_offset.value == 0 \
            else ramp.base + buf.elem_offset
        m = self._analyzer.modular_set(start)
        if m.coeff % t.lanes or m.base % t.lanes:
            return None
        return self.flat_index(buf, [ramp.base])

    def load(self, n: E.BufferLoad) -> str:
        if n.dtype.lanes > 1:
            start = self._aligned_start(n.buffer, n.indices, n.dtype)
            if start is not None:
                return f"(*(const {self.type_name(n.dtype)} *)(&{self.pointer(n.buffer)}[{start}]))"
        return super().load(n)

    def stmt_BufferStore(self, s: S.BufferStore) -> None:
        t = s.value.dtype
        if t.lanes > 1:
            start = self._aligned_start(s.buffer, s.indices, t)
            if start is not None:
                self.emit(f"*({self.type_name(t)} *)(&{self.pointer(s.buffer)}[{start}]) = {self.expr(s.value)};")
                return
        super().stmt_BufferStore(s)


def generate(mod: IRModule, fast_math: bool = False) -> str:
    """Every kernel of ``mod`` in one CUDA C file (the banner, the preamble, the kernels)."""
    renderer = CUDARenderer(fast_math)
    return f"{CUDARenderer.banner}\n{renderer.render(mod)}"

