"""Hand-written flattened PrimFuncs (as MakeAPI leaves them) for the runtime tests."""

from __future__ import annotations

from typing import Any

import loom
from loom.backend import build_module
from loom.ir import AssertStmt, AttrStmt, Buffer, BufferStore, Evaluate, For, GlobalVar, IRModule, PrimFunc, seq
from loom.ir import expr as E
from loom.target import Target


def prim(body: Any, *params: Any, name: str = "main", **attrs: Any) -> PrimFunc:
    """A PrimFunc whose Buffer parameters go through the buffer map."""
    plist, bmap = [], {}
    for p in params:
        if isinstance(p, Buffer):
            plist.append(p.data)
            bmap[p.data] = p
        else:
            plist.append(p)
    return PrimFunc(plist, body, buffer_map=bmap, attrs={"global_symbol": name, "loom.api": True, **attrs})


def interp_module(*funcs: PrimFunc) -> IRModule:
    """An IRModule of ``funcs`` (by their global_symbol) built for the interp target."""
    target = Target("interp")
    return IRModule({f.attrs["global_symbol"]: f.with_attr("target", target) for f in funcs},
                    attrs={"target": target})


def build(*funcs: PrimFunc) -> Any:
    """Build through the interp backend's stages, as ``loom.build`` does."""
    mod = interp_module(*funcs)
    return build_module(mod, mod.attrs["target"])


def vadd(dtype: str = "float32", name: str = "vadd") -> PrimFunc:
    """``C[i] = A[i] + B[i]`` over a symbolic length n."""
    n = loom.var("n")
    A, B, C = (loom.decl_buffer((n,), dtype, name=x) for x in "ABC")
    i = loom.var("i")
    return prim(For(i, 0, n, "serial", BufferStore(C, A[i] + B[i], [i])), A, B, C, name=name)


def scale2d() -> PrimFunc:
    """``B[i, j] = A[i, j] * alpha + k`` with A symbolically strided (m, n) and a float and an int scalar."""
    m, n, s0, s1 = (loom.var(x) for x in ("m", "n", "s0", "s1"))
    A = loom.decl_buffer((m, n), "float32", name="A", strides=(s0, s1))
    B = loom.decl_buffer((m, n), "float32", name="B")
    alpha, k = loom.var("alpha", "float32"), loom.var("k", "int32")
    i, j = loom.var("i"), loom.var("j")
    body = For(i, 0, m, "serial", For(j, 0, n, "serial",
                                      BufferStore(B, A[i, j] * alpha + loom.cast(k, "float32"), [i, j])))
    return prim(body, A, B, alpha, k, name="scale2d")


def offset_copy(factor: int = 4) -> PrimFunc:
    """``B[i] = A[i]`` where A has a symbolic elem_offset that must be a multiple of ``factor``."""
    A = loom.decl_buffer((8,), "int32", name="A", offset_factor=factor)
    B = loom.decl_buffer((8,), "int32", name="B")
    i = loom.var("i")
    check = AssertStmt(loom.floormod(A.elem_offset, factor) == 0,
                       f"buffer A: elem_offset must be a multiple of {factor}", Evaluate(0))
    return prim(seq(check, For(i, 0, 8, "serial", BufferStore(B, A[i], [i]))), A, B, name="offset_copy")


def guarded(limit: int = 100) -> PrimFunc:
    """``A[0] = x`` after asserting ``x < limit`` (an AssertStmt that fails at call time)."""
    A = loom.decl_buffer((1,), "int32", name="A")
    x = loom.var("x", "int32")
    body = AssertStmt(x < limit, f"x must be below {limit}", BufferStore(A, x, [0]))
    return prim(body, A, x, name="guarded")


def host_and_kernel() -> tuple[PrimFunc, PrimFunc]:
    """A host function launching ``twice_kernel0`` (thread-bound) as SplitHostDevice leaves them."""
    n = loom.var("n")
    KA = loom.decl_buffer((n,), "float32", name="KA")
    KB = loom.decl_buffer((n,), "float32", name="KB")
    tx = loom.var("threadIdx.x")
    iv = E.IterVar(E.Range.from_min_extent(0, n), tx, "thread_index", "threadIdx.x")
    kbody = AttrStmt(iv, "thread_extent", n, BufferStore(KB, KA[tx] * 2.0, [tx]))
    kernel = PrimFunc([KA.data, KB.data, n], kbody, attrs={
        "global_symbol": "twice_kernel0", "calling_conv": "device_kernel"})
    m = loom.var("m")
    A = loom.decl_buffer((m,), "float32", name="A")
    B = loom.decl_buffer((m,), "float32", name="B")
    launch = Evaluate(E.Call("int32", GlobalVar("twice_kernel0"), [A.data, B.data, m]))
    return prim(launch, A, B, name="twice"), kernel
