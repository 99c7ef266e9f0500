"""Matrix multiplication by BLAS: classic TVM's ``tvm.contrib.cblas``.

:func:`matmul` is an extern operation whose body is one ``call_extern`` of the
CBLAS routine ``cblas_sgemm`` (float32) or ``cblas_dgemm`` (float64), as
``scipy-openblas32`` names them (``scipy_cblas_sgemm``...): the compiled code
calls OpenBLAS directly, with no Python in between.  Install the library with
``pip install "loom-compiler[blas]"``.

Where each target finds BLAS:

* ``llvm`` and ``c`` load ``libscipy_openblas.so`` into the process when a
  module calling it is loaded (:mod:`loom.runtime.extern_libraries`), and
  ``export_library`` links it as a dependency (by path, with an rpath), so
  :func:`loom.runtime.load_module` works in a fresh process as long as the
  library stays where it was;
* ``interp`` runs a numpy implementation of the two routines (registered with
  :func:`loom.testing.register_extern`), so it needs no BLAS at all.

>>> import numpy as np, loom
>>> A = loom.placeholder((3, 4), "float64", name="A")
>>> B = loom.placeholder((4, 2), "float64", name="B")
>>> C = matmul(A, B)
>>> [int(x) for x in C.shape], str(C.dtype)
([3, 2], 'float64')
>>> f = loom.build(loom.create_schedule(C.op), [A, B, C], target="interp")
>>> a, b, c = np.arange(12.0).reshape(3, 4), np.ones((4, 2)), np.zeros((3, 2))
>>> f(a, b, c); c[:, 0]
array([ 6., 22., 38.])
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from ..errors import LoomError, LoomTypeError, LoomValueError
from ..ir import expr as E
from ..ir import stmt as S
from ..ir.expr_ops import cast, const, maximum as _max
from ..ir.intrin import call_extern
from ..runtime.extern_libraries import register_library
from ..te.operation import extern
from ..te.tensor import Tensor
from ..runtime.registry import list_global_func_names, register_func
from ..testing import register_extern, registered_externs

__all__ = ["matmul", "LIBRARY", "ROUTINES"]

#: The name :mod:`loom.runtime.extern_libraries` knows the BLAS library by.
LIBRARY = "scipy-openblas32"
#: The CBLAS routine called for each dtype.
ROUTINES = {"float32": "scipy_cblas_sgemm", "float64": "scipy_cblas_dgemm"}

# CBLAS enumerations (cblas.h).
_ROW_MAJOR, _NO_TRANS, _TRANS = 101, 111, 112
_INT32_MAX = (1 << 31) - 1


def _library_path() -> str:
    try:
        import scipy_openblas32  # type: ignore[import-not-found, import-untyped, unused-ignore]
    except ImportError:
        raise LoomError("loom.contrib.cblas calls BLAS from the scipy-openblas32 package, which is not installed; "
                        "`pip install \"loom-compiler[blas]\"` (or scipy-openblas32) and build again") from None
    path = os.path.join(scipy_openblas32.get_lib_dir(), scipy_openblas32.get_library(fullname=True))
    if not os.path.isfile(path):
        raise LoomError(f"scipy-openblas32 is installed but its library {path!r} is missing; reinstall it")
    return path


register_library(LIBRARY, ROUTINES.values(), _library_path)


def _check(t: Any, what: str) -> Tensor:
    if not isinstance(t, Tensor):
        raise LoomTypeError(f"cblas.matmul: {what} must be a Tensor, got {type(t).__name__}")
    if t.ndim != 2:
        raise LoomValueError(f"cblas.matmul: {what} {t.name} must be a matrix (2-d), got shape "
                             f"{[str(d) for d in t.shape]}")
    if str(t.dtype) not in ROUTINES:
        raise LoomTypeError(f"cblas.matmul: {what} {t.name} is {t.dtype}; BLAS multiplies float32 or float64")
    return t


def _blas_int(e: E.PrimExpr, what: str) -> E.PrimExpr:
    """A dimension as the 32-bit ``blasint`` of scipy-openblas32."""
    if isinstance(e, E.IntImm) and e.value > _INT32_MAX:
        raise LoomValueError(f"cblas.matmul: {what} is {e.value}, more than the 32-bit BLAS takes ({_INT32_MAX})")
    return cast(e, "int32")


def matmul(lhs: Tensor, rhs: Tensor, transa: bool = False, transb: bool = False, **kwargs: Any) -> Tensor:
    """``op(lhs) @ op(rhs)`` computed by BLAS, where ``op`` transposes when ``transa``/``transb`` is set.

    Both matrices are float32 or both float64; the result has their dtype.
    ``kwargs`` go to :func:`loom.extern` (``name``, default ``"C"``; ``tag``).
    Inner dimensions that differ are an error here when both are constants,
    and a failed assertion when the function runs otherwise.

    >>> import loom
    >>> A = loom.placeholder((5, 3), name="A")
    >>> B = loom.placeholder((4, 5), name="B")
    >>> [int(x) for x in matmul(A, B, transa=True, transb=True).shape]
    [3, 4]
    >>> matmul(A, B)
    Traceback (most recent call last):
    loom.errors.LoomValueError: cblas.matmul: the inner dimensions differ: A is 5 x 3 and B is 4 x 5 (transa=False, transb=False)
    """
    a, b = _check(lhs, "lhs"), _check(rhs, "rhs")
    if a.dtype != b.dtype:
        raise LoomTypeError(f"cblas.matmul: lhs {a.name} is {a.dtype} but rhs {b.name} is {b.dtype}; cast one")
    m, k = (a.shape[1], a.shape[0]) if transa else (a.shape[0], a.shape[1])
    k2, n = (b.shape[1], b.shape[0]) if transb else (b.shape[0], b.shape[1])
    if isinstance(k, E.IntImm) and isinstance(k2, E.IntImm) and k.value != k2.value:
        raise LoomValueError(f"cblas.matmul: the inner dimensions differ: {a.name} is {a.shape[0]} x {a.shape[1]} "
                             f"and {b.name} is {b.shape[0]} x {b.shape[1]} (transa={transa}, transb={transb})")
    routine = ROUTINES[str(a.dtype)]
    t = a.dtype

    def body(ins: list[Any], outs: list[Any]) -> S.Stmt:
        A, B, C = ins[0], ins[1], outs[0]
        M, N, K = (_blas_int(x, w) for x, w in ((m, "M"), (n, "N"), (k, "K")))
        # Row-major: the leading dimension is a stored row's length, at least 1 even for an empty matrix.
        lda, ldb, ldc = (_max(_blas_int(x.shape[1], f"{x.name}'s row length"), const(1, "int32")) for x in (A, B, C))
        call = call_extern("int32", routine, const(_ROW_MAJOR, "int32"),
                           const(_TRANS if transa else _NO_TRANS, "int32"), const(_TRANS if transb else _NO_TRANS, "int32"),
                           M, N, K, const(1.0, t), A.data, lda, B.data, ldb, const(0.0, t), C.data, ldc)
        stmt: S.Stmt = S.Evaluate(call)
        if not (isinstance(k, E.IntImm) and isinstance(k2, E.IntImm)):
            stmt = S.AssertStmt(E.EQ(*_same(k, k2)), f"cblas.matmul: the inner dimensions of {a.name} and {b.name} "
                                f"differ (transa={transa}, transb={transb})", stmt)
        return stmt

    kwargs.setdefault("name", "C")
    out = extern((m, n), [a, b], body, dtype=str(t), **kwargs)
    assert isinstance(out, Tensor)
    return out


def _same(x: E.PrimExpr, y: E.PrimExpr) -> tuple[E.PrimExpr, E.PrimExpr]:
    if x.dtype == y.dtype:
        return x, y
    wide = x.dtype if x.dtype.bits >= y.dtype.bits else y.dtype
    return cast(x, wide), cast(y, wide)


# -- the interpreter's implementation of the two routines ----------------------------------

def _view(flat: np.ndarray, rows: int, cols: int, ld: int, what: str) -> np.ndarray:
    """Indices of a row-major ``rows x cols`` matrix with leading dimension ``ld`` in ``flat``."""
    if rows and cols and (rows - 1) * ld + cols > flat.size:
        raise LoomValueError(f"cblas gemm: {what} of {rows} x {cols} (leading dimension {ld}) does not fit "
                             f"in its {flat.size} elements")
    return (np.arange(rows)[:, None] * ld + np.arange(cols)[None, :]).reshape(rows, cols)


def _gemm(order: Any, ta: Any, tb: Any, m: Any, n: Any, k: Any, alpha: Any, a: np.ndarray, lda: Any,
          b: np.ndarray, ldb: Any, beta: Any, c: np.ndarray, ldc: Any) -> None:
    """``C = alpha * op(A) @ op(B) + beta * C`` on flat arrays, as CBLAS's row-major gemm."""
    if int(order) != _ROW_MAJOR:
        raise LoomValueError(f"cblas gemm: only row-major order ({_ROW_MAJOR}) is implemented, got {int(order)}")
    m, n, k, lda, ldb, ldc = (int(x) for x in (m, n, k, lda, ldb, ldc))
    trans_a, trans_b = int(ta) == _TRANS, int(tb) == _TRANS
    ia = _view(a, *((k, m) if trans_a else (m, k)), lda, "A")
    ib = _view(b, *((n, k) if trans_b else (k, n)), ldb, "B")
    ic = _view(c, m, n, ldc, "C")
    opa, opb = a[ia], b[ib]
    product = (opa.T if trans_a else opa) @ (opb.T if trans_b else opb)
    result = alpha * product if beta == 0 else alpha * product + beta * c[ic]  # beta 0: C is not read
    c[ic] = result.astype(c.dtype)


for _routine in ROUTINES.values():
    if _routine not in registered_externs():
        register_extern(_routine, _gemm)


#: The packed-function name of :func:`matmul` (TVM's ``"tvm.contrib.cblas.matmul"``).
PACKED_NAME = "loom.contrib.cblas.matmul"


def _packed_matmul(a: Any, b: Any, c: Any, transa: bool = False, transb: bool = False) -> None:
    """``c = op(a) @ op(b)`` on the arrays a kernel passes to ``call_packed(PACKED_NAME, ...)``."""
    x, y = a.numpy(), b.numpy()
    product = (x.T if transa else x) @ (y.T if transb else y)
    if product.shape != tuple(c.shape):
        raise LoomValueError(f"{PACKED_NAME}: the product has shape {product.shape}, the output {tuple(c.shape)}")
    c.copyfrom(product.astype(c.dtype))


# Kernels written against TVM's packed BLAS call (the extern-op tutorial) find it by name.
if PACKED_NAME not in list_global_func_names():
    register_func(PACKED_NAME, _packed_matmul)
