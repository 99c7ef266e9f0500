"""Parallel loops on real threads: an outermost ``parallel`` For becomes an OpenMP region.

The runtime is libgomp, called through ``GOMP_parallel``, the entry point GCC
itself emits for ``#pragma omp parallel``: it ships with every GCC toolchain,
keeps a pool of threads across regions (a region costs a wake-up, not a thread
creation), and LLVM's libomp implements the same entry point, so a library
exported by this backend runs with either.  For the loop

    for i in range(lo, lo + n) [parallel]: body

the enclosing function emits::

    closure = {error = NULL, lo, n, <every value the body uses>}   ; on its stack
    GOMP_parallel(@f.parallel, &closure, threads, 0)
    if closure.error: *error = closure.error; return -1    ; freeing its live heap memory

``threads`` is ``loom_num_threads`` (the module global the runtime sets from
``LOOM_NUM_THREADS``; 0 asks ``omp_get_max_threads()``), capped at ``n`` and at
one thread per ``PARALLEL_GRAIN`` elements of work (:mod:`loom.codegen.parallel_work`:
a small loop runs on the calling thread alone, whose team of one wakes nobody).  Every
thread of the team, the caller included, runs ``void @f.parallel(i8* closure)``:
it takes its static, contiguous chunk of ``[lo, lo + n)`` from
``omp_get_thread_num()``/``omp_get_num_threads()`` and calls
``i32 @f.parallel.body(<values>, begin, end, i8** error)``, which runs the loop
over the chunk.  That function is always inlined into ``@f.parallel``, and its
pointer parameters carry the ``noalias``/``align`` facts the enclosing function
had, so the inliner turns them into alias scopes exactly as for ``.compute``:
loads from the closure would otherwise hide them and stop LLVM's vectorizer.

Nesting: ``parallel`` loops inside a region run serially on their thread; the
outer team already occupies the cores, and nested teams would only
oversubscribe them.  Errors: a failing assert stores its message atomically
into the closure's error slot (any failing thread's message wins) and ends that
thread's chunk; the others finish theirs.  Allocations inside the body belong
to the outlined function, so each thread has its own: stack slots in its entry
block, heap memory freed on every exit.
"""

from __future__ import annotations

import logging
from typing import Any

from llvmlite import ir

from loom.errors import LoomError
from loom.ir import expr as E
from loom.ir import stmt as S
from loom.ir.functor import Visitor
from loom.codegen.parallel_work import min_iterations_per_thread
from loom.runtime.native_library import THREADS_SYMBOL

from .codegen_expr import PTR, llvm_type
from .codegen_stmt import StmtEmitter

__all__ = ["emit_parallel_for", "thread_count_global", "OPENMP_SYMBOLS"]

#: Under ``loom`` (``logging.getLogger("loom")`` controls it).
log = logging.getLogger("loom.backends.llvm")

I32 = ir.IntType(32)
#: The OpenMP runtime functions parallel regions call (a module using any needs libgomp).
OPENMP_SYMBOLS = ("GOMP_parallel", "omp_get_thread_num", "omp_get_num_threads", "omp_get_max_threads")
_REGION_FN = ir.FunctionType(ir.VoidType(), [PTR])


def thread_count_global(module: ir.Module) -> ir.GlobalVariable:
    """``i32 @loom_num_threads``, defined (as 0) on first use: the thread count of the module's regions."""
    found = module.globals.get(THREADS_SYMBOL)
    if found is None:
        found = ir.GlobalVariable(module, I32, name=THREADS_SYMBOL)
        found.initializer = ir.Constant(I32, 0)
        found.align = 4
    return found


class _Uses(Visitor):
    """The variables of ``defined`` a statement uses, in order of first use (buffers' fields included)."""

    def __init__(self, defined: dict[int, Any]) -> None:
        self.defined = defined
        self.found: dict[int, E.Var] = {}
        self._buffers: set[int] = set()

    def visit_Var(self, v: E.Var) -> None:
        if id(v) in self.defined:
            self.found.setdefault(id(v), v)

    def visit_Buffer(self, buf: Any) -> None:
        if id(buf) not in self._buffers:  # one buffer is named by every load and store
            self._buffers.add(id(buf))
            self.generic_visit(buf)


class RegionEmitter(StmtEmitter):
    """Emits the body of one parallel region into its own function, sharing the parent's module."""

    in_parallel = True

    def __init__(self, parent: StmtEmitter, fn: ir.Function, captured: list[E.Var],
                 constants: dict[int, ir.Constant]) -> None:
        super().__init__()
        self.share_function_state(parent)
        self.values = dict(constants)  # constants stay constants: folding needs them
        for arg, var in zip(fn.args, captured):
            arg.name = var.name
            self.values[id(var)] = arg
            facts = parent.pointer_facts.get(id(var))
            if facts is not None:
                noalias, align = facts
                if noalias:
                    arg.add_attribute("noalias")
                if align > 1:
                    arg.attributes.align = align
                self.pointer_facts[id(var)] = facts
        self.error_ptr = fn.args[-1]
        self.error_ptr.name = "error"

    def set_error(self, message: ir.Value) -> None:
        # Several threads may fail at once; an atomic store keeps that race benign.
        self.builder.store_atomic(message, self.error_ptr, "monotonic", align=8)

    def callee_error_slot(self) -> ir.Value:
        # A callee stores its message plainly: into this thread's own slot, copied on atomically.
        return self.local_error_slot()

    def _s_For(self, s: S.For) -> None:
        if s.kind is S.ForKind.PARALLEL:
            log.warning("%s: the parallel loop %s runs serially: it is nested in a parallel loop, whose threads "
                        "already occupy the cores", self.fname, s.loop_var.name)
        super()._s_For(s)

    def emit(self, fn: ir.Function, s: S.For) -> None:
        self.entry_block = fn.append_basic_block("entry")
        body = fn.append_basic_block("body")
        self.builder = ir.IRBuilder(body)
        begin, end = fn.args[-3], fn.args[-2]
        begin.name, end.name = f"{s.loop_var.name}.begin", f"{s.loop_var.name}.end"
        self.loop(s.loop_var, begin, end, s.body)
        if not self.builder.block.is_terminated:
            self.return_code(0)
        with self.builder.goto_block(self.entry_block):
            self.builder.branch(body)


def _captured(em: StmtEmitter, s: S.For) -> tuple[list[E.Var], dict[int, ir.Constant]]:
    """The variables the body needs from the closure, and those bound to constants."""
    uses = _Uses(em.values)
    uses.visit(s.body)
    dynamic = [v for v in uses.found.values() if not isinstance(em.values[id(v)], ir.Constant)]
    constants = {k: em.values[k] for k in uses.found if isinstance(em.values[k], ir.Constant)}
    return dynamic, constants


def _resize(b: ir.IRBuilder, v: ir.Value, ty: ir.IntType, signed: bool = False) -> ir.Value:
    """Integer ``v`` in type ``ty`` (truncated, or extended as ``signed`` says)."""
    if v.type.width == ty.width:
        return v
    if v.type.width > ty.width:
        return b.trunc(v, ty)
    return b.sext(v, ty) if signed else b.zext(v, ty)


def _openmp(em: StmtEmitter, name: str) -> ir.Function:
    return em.extern(name, I32, [])


def _emit_worker(em: StmtEmitter, name: str, body_fn: ir.Function, struct: ir.LiteralStructType,
                 n_values: int, signed: bool) -> ir.Function:
    """``void name(i8* closure)``: one thread's static chunk of the iteration space."""
    fn = ir.Function(em.module, _REGION_FN, name=name)
    fn.linkage = "internal"
    fn.attributes.add("nounwind")
    fn.args[0].name = "closure"
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    closure = b.bitcast(fn.args[0], struct.as_pointer())

    def field(k: int, label: str) -> ir.Value:
        ptr = b.gep(closure, [ir.Constant(I32, 0), ir.Constant(I32, k)], inbounds=True)
        return b.load(ptr, name=label)

    lo, n = field(1, "lo"), field(2, "n")
    values = [field(3 + k, body_fn.args[k].name or f"v{k}") for k in range(n_values)]
    ity = lo.type
    tid = _resize(b, b.call(_openmp(em, "omp_get_thread_num"), [], name="tid"), ity)
    team = _resize(b, b.call(_openmp(em, "omp_get_num_threads"), [], name="team"), ity)
    zero, one = ir.Constant(ity, 0), ir.Constant(ity, 1)
    if signed:  # a negative extent runs nothing
        n = b.select(b.icmp_signed("<", n, zero), zero, n, name="n.clamped")
    # chunk = ceil(n / team); thread t runs [lo + min(t*chunk, n), lo + min((t+1)*chunk, n)).
    chunk = b.udiv(b.sub(b.add(n, team), one), team, name="chunk")
    start = b.mul(tid, chunk)
    start = b.select(b.icmp_unsigned("<", start, n), start, n)
    stop = b.add(start, chunk)
    stop = b.select(b.icmp_unsigned("<", stop, n), stop, n)
    begin, end = b.add(lo, start, name="begin"), b.add(lo, stop, name="end")
    slot = b.gep(closure, [ir.Constant(I32, 0), ir.Constant(I32, 0)], inbounds=True, name="error.slot")
    b.call(body_fn, [*values, begin, end, slot])  # a failure is in the slot already
    b.ret_void()
    return fn


def _team_size(em: StmtEmitter, extent: ir.Value, signed: bool, min_iterations: int) -> ir.Value:
    """``min(extent // min_iterations, loom_num_threads or omp_get_max_threads())``, at least 1, as i32.

    ``min_iterations`` is how many iterations make a thread's share worth waking it for
    (:mod:`loom.codegen.parallel_work`).
    """
    b = em.builder
    wanted = b.load(thread_count_global(em.module), name="threads.wanted")
    wanted = b.select(b.icmp_signed("<=", wanted, ir.Constant(I32, 0)),
                      b.call(_openmp(em, "omp_get_max_threads"), []), wanted, name="threads.max")
    wide = ir.IntType(max(extent.type.width, 33))  # holds every extent and thread count, signed
    ext, w = _resize(b, extent, wide, signed), _resize(b, wanted, wide)
    if min_iterations > 1:
        ext = b.sdiv(ext, ir.Constant(wide, min_iterations), name="threads.by_work")
    team = b.select(b.icmp_signed("<", ext, w), ext, w)
    team = b.select(b.icmp_signed("<", team, ir.Constant(wide, 1)), ir.Constant(wide, 1), team)
    return _resize(b, team, I32)


def emit_parallel_for(em: StmtEmitter, s: S.For) -> None:
    """Emit the outermost parallel loop ``s`` as an OpenMP region called from ``em``'s function."""
    if not s.loop_var.dtype.is_integer or s.loop_var.dtype.lanes != 1:
        raise LoomError(f"{em.fname}: parallel loop {s.loop_var.name} needs a scalar integer loop variable, "
                        f"got {s.loop_var.dtype}")
    b = em.builder
    signed = s.loop_var.dtype.is_int
    lo, n = em.expr(s.min), em.expr(s.extent)
    captured, constants = _captured(em, s)
    values = [em.values[id(v)] for v in captured]
    ity = llvm_type(s.loop_var.dtype)
    err_ty = PTR.as_pointer()

    name = em.module.get_unique_name(f"{em.symbol}.parallel")
    body_ty = ir.FunctionType(I32, [*(v.type for v in values), ity, ity, err_ty])
    body_fn = ir.Function(em.module, body_ty, name=f"{name}.body")
    body_fn.linkage = "internal"
    body_fn.attributes.add("alwaysinline")
    body_fn.attributes.add("nounwind")
    RegionEmitter(em, body_fn, captured, constants).emit(body_fn, s)

    struct = ir.LiteralStructType([PTR, ity, ity, *(v.type for v in values)])
    worker = _emit_worker(em, name, body_fn, struct, len(values), signed)

    with b.goto_block(em.entry_block):  # one closure per function, however often the region runs
        b.position_at_start(em.entry_block)
        closure = b.alloca(struct, name=f"{s.loop_var.name}.closure")

    def slot(k: int) -> ir.Value:
        return b.gep(closure, [ir.Constant(I32, 0), ir.Constant(I32, k)], inbounds=True)

    b.store(ir.Constant(PTR, None), slot(0))
    for k, v in enumerate([lo, n, *values]):
        b.store(v, slot(k + 1))
    gomp = em.extern("GOMP_parallel", ir.VoidType(), [_REGION_FN.as_pointer(), PTR, I32, I32])
    team = _team_size(em, n, signed, min_iterations_per_thread(s.body))
    b.call(gomp, [worker, b.bitcast(closure, PTR), team, ir.Constant(I32, 0)])

    message = b.load(slot(0), name="region.error")
    failed, done = b.append_basic_block("region.failed"), b.append_basic_block("region.done")
    b.cbranch(b.icmp_unsigned("!=", message, ir.Constant(PTR, None)), failed, done)
    b.position_at_end(failed)
    em.set_error(message)
    em.return_code(-1)
    b.position_at_end(done)
