"""Statements to LLVM IR: loops, branches, allocations, asserts and stores.

An outermost ``parallel`` loop runs on a thread team (:mod:`.parallel` outlines
it); ``parallel`` loops inside one run serially, as do loops of the other kinds:
``vectorized`` loops that the pipeline did not turn into vector code are plain
loops for LLVM's vectorizer, ``unrolled`` loops are left to LLVM's unroller, and
``thread_binding`` loops and ``thread_extent`` regions run their threads one
after another.  Calls of other functions and device allocations are
:mod:`.calls`'s.
"""

from __future__ import annotations

from typing import Callable

from llvmlite import ir

from loom.errors import LoomError
from loom.ir import expr as E
from loom.ir import stmt as S
from loom.ir.dtype import DataType

from .calls import is_device_allocation
from .codegen_expr import I64, PTR, ExprEmitter, llvm_type

__all__ = ["StmtEmitter", "STACK_LIMIT_BYTES"]

#: Constant-size allocations up to this size live on the stack; larger or symbolic ones on the heap.
STACK_LIMIT_BYTES = 64 * 1024
_HEAP_ALIGNMENT = 64


class StmtEmitter(ExprEmitter):
    """Emits statements; a failed assert stores its message into ``self.error_ptr`` and returns -1.

    ``pointer_facts`` maps ``id(Var)`` of a pointer known to the function to
    ``(noalias, align)``, which code outlined from it (parallel bodies) re-declares.
    """

    entry_block: ir.Block
    error_ptr: ir.Value
    #: True while emitting the body of a parallel region: nested parallel loops run serially.
    in_parallel = False

    def __init__(self) -> None:
        super().__init__()
        #: Emitters of the frees of live allocations (heap, device), run on every error return.
        self.cleanups: list[Callable[[], None]] = []
        self.pointer_facts: dict[int, tuple[bool, int]] = {}
        self._local_error: ir.Value | None = None

    def stmt(self, s: S.Stmt) -> None:
        rule = getattr(self, f"_s_{type(s).__name__}", None)
        if rule is None:
            raise LoomError(f"{self.fname}: the llvm backend cannot compile {type(s).__name__} statements")
        rule(s)

    def _s_SeqStmt(self, s: S.SeqStmt) -> None:
        for x in s.seq:
            self.stmt(x)

    def _s_Evaluate(self, s: S.Evaluate) -> None:
        if not isinstance(s.value, (E.IntImm, E.FloatImm, E.StringImm)):
            self.expr(s.value)

    def _s_AttrStmt(self, s: S.AttrStmt) -> None:
        iv = s.node
        if s.attr_key in ("thread_extent", "virtual_thread") and isinstance(iv, E.IterVar) \
                and id(iv.var) not in self.values:
            # A thread binding on the CPU: its threads run one after another, as on the interpreter.
            t = iv.var.dtype
            hi = self.convert(self.expr(s.value), s.value.dtype, t)
            self.loop(iv.var, ir.Constant(llvm_type(t), 0), hi, s.body)
            return
        self.stmt(s.body)  # other annotations only guide the passes before codegen

    def _s_LetStmt(self, s: S.LetStmt) -> None:
        v = self.expr(s.value)
        self.name(v, s.var)
        self.values[id(s.var)] = v
        self.stmt(s.body)
        del self.values[id(s.var)]

    def _s_BufferStore(self, s: S.BufferStore) -> None:
        self.store(s.buffer, s.indices, self.expr(s.value), s.value.dtype)

    def _s_AssertStmt(self, s: S.AssertStmt) -> None:
        b = self.builder
        ok, fail = b.append_basic_block("assert_ok"), b.append_basic_block("assert_fail")
        cond = self.expr(s.condition)
        b.cbranch(cond, ok, fail)
        b.position_at_end(fail)
        msg = s.message.value if isinstance(s.message, E.StringImm) else str(s.message)
        self.set_error(self.string(msg))
        self.return_code(-1)
        b.position_at_end(ok)
        self.stmt(s.body)

    def set_error(self, message: ir.Value) -> None:
        """Store the ``i8*`` ``message`` where the caller reads the error."""
        self.builder.store(message, self.error_ptr)

    def return_code(self, code: int) -> None:
        """Free the live allocations and return ``code``."""
        for release in reversed(self.cleanups):
            release()
        self.builder.ret(ir.Constant(ir.IntType(32), code))

    def local_error_slot(self) -> ir.Value:
        """An ``i8*`` on this function's stack: where messages go that may be dropped or copied on."""
        if self._local_error is None:
            with self.builder.goto_block(self.entry_block):
                self.builder.position_at_start(self.entry_block)
                self._local_error = self.builder.alloca(PTR, name="local.error")
        return self._local_error

    def callee_error_slot(self) -> ir.Value:
        """Where a called function writes its message: the caller's own ``error`` (regions override)."""
        return self.error_ptr

    def _s_IfThenElse(self, s: S.IfThenElse) -> None:
        b = self.builder
        cond = self.expr(s.condition)
        then_bb = b.append_basic_block("if_then")
        else_bb = b.append_basic_block("if_else") if s.else_case is not None else None
        end_bb = b.append_basic_block("if_end")
        b.cbranch(cond, then_bb, else_bb or end_bb)
        b.position_at_end(then_bb)
        self.stmt(s.then_case)
        b.branch(end_bb)
        if else_bb is not None and s.else_case is not None:
            b.position_at_end(else_bb)
            self.stmt(s.else_case)
            b.branch(end_bb)
        b.position_at_end(end_bb)

    def _s_While(self, s: S.While) -> None:
        b = self.builder
        head, body, end = (b.append_basic_block(n) for n in ("while_head", "while_body", "while_end"))
        b.branch(head)
        b.position_at_end(head)
        b.cbranch(self.expr(s.condition), body, end)
        b.position_at_end(body)
        self.stmt(s.body)
        b.branch(head)
        b.position_at_end(end)

    def _s_For(self, s: S.For) -> None:
        if s.kind is S.ForKind.PARALLEL and not self.in_parallel:
            from .parallel import emit_parallel_for  # parallel.py builds on this module

            emit_parallel_for(self, s)
            return
        lo = self.expr(s.min)
        hi = self.builder.add(lo, self.expr(s.extent), name=f"{s.loop_var.name}.end")
        self.loop(s.loop_var, lo, hi, s.body)

    def loop(self, var: E.Var, lo: ir.Value, hi: ir.Value, body: S.Stmt) -> None:
        """``for var in [lo, hi): body`` as a sequential loop."""
        b = self.builder
        t = var.dtype
        pre = b.block
        name = var.name
        head, block, end = (b.append_basic_block(f"{name}.{n}") for n in ("head", "body", "end"))
        b.branch(head)
        b.position_at_end(head)
        i = b.phi(llvm_type(t), name=name)
        i.add_incoming(lo, pre)
        cmp = b.icmp_signed("<", i, hi) if t.is_int else b.icmp_unsigned("<", i, hi)
        b.cbranch(cmp, block, end)
        b.position_at_end(block)
        self.values[id(var)] = i
        self.stmt(body)
        del self.values[id(var)]
        nxt = b.add(i, ir.Constant(i.type, 1), name=f"{name}.next")
        i.add_incoming(nxt, b.block)
        b.branch(head)
        b.position_at_end(end)

    def _s_Allocate(self, s: S.Allocate) -> None:
        b = self.builder
        if is_device_allocation(s):
            self.calls.allocate_device(self, s)
            return
        elem = llvm_type(s.dtype.element_of(), memory=True)
        elem_bytes = max(1, s.dtype.bits // 8) * s.dtype.lanes
        const = all(isinstance(x, E.IntImm) for x in s.extents)
        count = 1
        for x in s.extents:
            count *= x.value if isinstance(x, E.IntImm) else 1
        if const and 0 <= count * elem_bytes <= STACK_LIMIT_BYTES:
            # In the entry block: one stack slot however often the statement runs.
            with b.goto_block(self.entry_block):
                b.position_at_start(self.entry_block)
                ptr = b.alloca(elem, size=ir.Constant(I64, max(1, count * s.dtype.lanes)), name=s.buffer_var.name)
                ptr.align = _HEAP_ALIGNMENT
            self.bind_allocation(s, ptr)
            return
        size = self.allocation_bytes(s)
        # aligned_alloc wants a multiple of the alignment (and never 0); a size this
        # rounding wraps is one no allocator gives, so it fails as out of memory below.
        size = b.and_(b.add(size, ir.Constant(I64, _HEAP_ALIGNMENT)), ir.Constant(I64, -_HEAP_ALIGNMENT))
        alloc = self.extern("aligned_alloc", PTR, [I64, I64])
        ptr = b.call(alloc, [ir.Constant(I64, _HEAP_ALIGNMENT), size], name=s.buffer_var.name)
        self.fail_if(b.icmp_unsigned("==", ptr, ir.Constant(PTR, None)),
                     f"out of memory in allocation of {s.buffer_var.name}")
        free = self.extern("free", ir.VoidType(), [PTR])
        self.cleanups.append(lambda: self.builder.call(free, [ptr]))
        self.bind_allocation(s, ptr)
        self.cleanups.pop()
        self.builder.call(free, [ptr])

    def allocation_bytes(self, s: S.Allocate) -> ir.Value:
        """The ``i64`` byte size of allocation ``s``, failing the function (as the interpreter
        raises) on a negative extent, or out of memory where the size overflows 64 bits."""
        b = self.builder
        size: ir.Value = ir.Constant(I64, max(1, s.dtype.bits // 8) * s.dtype.lanes)
        overflow: ir.Value = ir.Constant(ir.IntType(1), 0)
        name = s.buffer_var.name
        for x in s.extents:
            n = self.convert(self.expr(x), x.dtype, DataType("int", 64))
            if not x.dtype.is_uint:
                self.fail_if(b.icmp_signed("<", n, ir.Constant(I64, 0)), f"allocate {name} with a negative extent")
            product = b.smul_with_overflow(size, n)
            size, overflow = b.extract_value(product, 0), b.or_(overflow, b.extract_value(product, 1))
        self.fail_if(overflow, f"out of memory in allocation of {name}")
        return size

    def fail_if(self, cond: ir.Value, message: str | None, error: ir.Value | None = None) -> None:
        """Return -1 when ``cond``: with ``message``, or with the one a callee wrote into ``error``."""
        b = self.builder
        failed, ok = b.append_basic_block("check.failed"), b.append_basic_block("check.ok")
        b.cbranch(cond, failed, ok)
        b.position_at_end(failed)
        if message is not None:
            self.set_error(self.string(message))
        elif error is not None and error is not self.error_ptr:  # the callee wrote into a slot of ours
            self.set_error(b.load(error, align=8))
        self.return_code(-1)
        b.position_at_end(ok)

    def bind_allocation(self, s: S.Allocate, ptr: ir.Value) -> None:
        """Emit the body of allocation ``s`` with its buffer at ``ptr``."""
        # Fresh memory aliases nothing else the function can name.
        key = id(s.buffer_var)
        self.values[key], self.pointer_facts[key] = ptr, (True, _HEAP_ALIGNMENT)
        self.stmt(s.body)
        del self.values[key], self.pointer_facts[key]
