"""Statements of the C-style renderer, and the hooks where dialects differ on them.

:class:`StatementRenderer` is a base of :class:`~loom.codegen.CStyleRenderer`.
Statements are rendered the same way in every dialect; what a dialect decides
is behind overridable hooks:

* :meth:`~StatementRenderer.assert_failure`: what a failed ``AssertStmt`` does
  (the CPU ABI stores a message and returns -1; the base refuses asserts);
* :meth:`~StatementRenderer.allocate_heap` and
  :meth:`~StatementRenderer.allocate_device`: allocations that do not fit on the
  stack, and allocations annotated with a device type
  (:data:`loom.runtime.abi.DEVICE_TYPE_ANNOTATION`); each returns a
  :class:`Release`, the statements that free the memory on an error return and
  at the end of its scope.  The base refuses both (a device dialect cannot
  allocate on the heap);
* :meth:`~StatementRenderer.render_thread_extent`: a thread binding, which the
  dialect's :attr:`thread_idx` maps to an index expression, or a serial loop;
* :meth:`~StatementRenderer.region_failure`: how a failure recorded inside an
  OpenMP loop fails the function after the loop (see :meth:`~StatementRenderer.fail`).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, Callable, ClassVar, Sequence

import attrs

from ..ir import expr as E
from ..ir import stmt as S
from ..ir.dtype import DataType
from ..ir.function import GlobalVar
from ..runtime.abi import DEVICE_TYPE_ANNOTATION
from .cstyle_ops import CodegenError, is_simple
from .flat_offset import OffsetTerm, offset_terms

_log = logging.getLogger(__name__)

__all__ = ["StatementRenderer", "Release", "Region", "may_exit", "constant_count", "fits_stack",
           "is_device_allocation"]


@attrs.frozen
class Release:
    """How an allocation's memory goes back: ``on_error`` runs before every error return inside its
    scope (innermost allocation first), ``at_end`` where the scope ends.

    >>> Release("free(p);", "free(p);").on_error
    'free(p);'
    """

    on_error: str
    at_end: str


@attrs.define
class Region:
    """An OpenMP loop being rendered: a failure inside it stores its message in ``error`` and jumps to
    ``label``, the end of the iteration (no statement may leave the loop); ``used`` once one does."""

    error: str
    label: str
    used: bool = False


class StatementRenderer:
    """The ``stmt_*`` methods and their hooks (a base of :class:`~loom.codegen.CStyleRenderer`, which
    provides the expression rendering and emission helpers they use)."""

    stack_limit: ClassVar[int]
    openmp: bool
    parallel_pragma: ClassVar[str]

    def parallel_pragma_for(self, s: S.For, extent: str) -> str:
        """The pragma line of the outermost parallel loop ``s`` whose extent renders as ``extent``."""
        return self.parallel_pragma
    thread_idx: ClassVar[dict[str, str]]
    _lines: list[str]
    _depth: int
    _declared: set[int]
    _bound: set[int]
    _elem: dict[int, Any]
    _releases: list[Release]
    _parallel: int
    #: The OpenMP loop whose body is being rendered, else None; how many the function has had.
    _region: Region | None
    _regions: int

    if TYPE_CHECKING:  # what CStyleRenderer provides (this class is only ever its base)
        indent_unit: ClassVar[str]

        def expr(self, e: Any) -> str: ...
        def emit(self, line: str) -> None: ...
        def name(self, var: E.Var) -> str: ...
        def bind(self, base: str, ctype: str, text: str) -> str: ...
        def fresh(self, base: str) -> str: ...
        def tmp(self) -> str: ...
        def block(self, head: str, body: S.Stmt | None, tail: str = "}") -> None: ...
        def type_name(self, t: DataType) -> str: ...
        def string_literal(self, text: str) -> str: ...
        def pointer(self, buf: Any) -> str: ...
        def flat_index(self, buf: Any, indices: Any) -> str: ...
        def lane_offsets(self, buf: Any, terms: Sequence[OffsetTerm]) -> tuple[list[str], str]: ...
        def _contiguous(self, buf: Any, terms: Sequence[OffsetTerm]) -> str | None: ...
        def _vector_bytes(self, t: DataType, var: str) -> str: ...

    # -- hooks ----------------------------------------------------------------

    def assert_failure(self, message: str) -> str:
        """The C statements run when an assertion fails with ``message`` (inside ``if (!cond) { ... }``)."""
        raise CodegenError(f"{type(self).__name__} cannot render a failing assertion ({message!r}); "
                           "the dialect must override assert_failure")

    def allocate_heap(self, s: S.Allocate, ctype: str, name: str) -> Release:
        """Emit the declaration of ``ctype *name`` pointing at fresh memory for ``s``; how to free it."""
        raise CodegenError(f"{type(self).__name__} cannot allocate {s.buffer_var.name} ({s.dtype} x "
                           f"{', '.join(map(str, s.extents))}) outside the stack")

    def allocate_device(self, s: S.Allocate, ctype: str, name: str) -> Release:
        """Like :meth:`allocate_heap`, for memory of the device ``s``'s annotations name."""
        raise CodegenError(f"{type(self).__name__} cannot allocate device memory ({s.buffer_var.name})")

    def region_failure(self, message: str) -> str:
        """The C statements that fail the function with the message in the C variable ``message``, after
        an OpenMP loop in which a statement failed (:meth:`fail`)."""
        raise CodegenError(f"{type(self).__name__} cannot fail after a parallel loop; the dialect must override "
                           "region_failure")

    def fail(self, message: str) -> str:
        """C statements that fail the function with ``message`` wherever they run.

        Outside OpenMP loops it is the dialect's :meth:`assert_failure`.  Inside one,
        where no statement may leave the loop, the message is stored (atomically:
        threads may fail at once) into the loop's error variable and the rest of
        the iteration is skipped; after the loop, :meth:`region_failure` fails the
        function with it.  The other iterations run to their end.
        """
        region = self._region
        if region is None:
            return self.assert_failure(message)
        region.used = True
        return (f"__atomic_store_n(&{region.error}, {self.string_literal(message)}, __ATOMIC_RELAXED); "
                f"goto {region.label};")

    def error_cleanup(self) -> str:
        """The ``on_error`` statements of every live allocation, innermost first (with a trailing space)."""
        frees = " ".join(r.on_error for r in reversed(self._releases))
        return frees + " " if frees else ""

    def byte_size(self, s: S.Allocate, ctype: str) -> str:
        """Emit the checked computation of ``s``'s size in bytes; the ``size_t`` variable holding it.

        A negative extent fails the function (as the interpreter raises), and a size that
        overflows ``size_t`` fails as out of memory, rather than wrapping to a small buffer.
        """
        count = constant_count(s)
        if count is not None and all(isinstance(x, E.IntImm) and x.value >= 0 for x in s.extents) \
                and count * s.dtype.bytes < 1 << 62:
            return " * ".join([f"(size_t)({self.expr(x)})" for x in s.extents] + [f"sizeof({ctype})"])
        label = s.buffer_var.name
        size = self.fresh(f"{self.name(s.buffer_var)}_bytes")
        self.emit(f"size_t {size} = sizeof({ctype});")
        for x in s.extents:
            extent = self.bind("extent", "int64_t", f"(int64_t)({self.expr(x)})")
            if not x.dtype.is_uint:
                self.emit(f"if ({extent} < 0) {{ {self.fail(f'allocate {label} with a negative extent')} }}")
            self.emit(f"if (__builtin_mul_overflow({size}, (size_t){extent}, &{size})) "
                      f"{{ {self.fail(f'out of memory in allocation of {label}')} }}")
        return size

    # -- statements -------------------------------------------------------------

    def stmt(self, s: S.Stmt) -> None:
        """Emit the C lines of ``s``."""
        method = getattr(self, f"stmt_{type(s).__name__}", None)
        if method is None:
            raise CodegenError(f"{type(self).__name__} cannot render {type(s).__name__} statements")
        method(s)

    def stmt_SeqStmt(self, s: S.SeqStmt) -> None:
        for x in s.seq:
            self.stmt(x)

    def stmt_Evaluate(self, s: S.Evaluate) -> None:
        if not isinstance(s.value, (E.IntImm, E.FloatImm)):
            text = self.expr(s.value)
            if text and text != "0":
                self.emit(f"{text};" if isinstance(s.value, E.Call) else f"(void)({text});")

    def scoped(self, var: E.Var, render: Callable[[], None]) -> None:
        """Run ``render``, which declares ``var``, in a C block of its own when ``var``
        was declared before (bodies copied by unrolling or partitioning)."""
        again = id(var) in self._declared
        self._declared.add(id(var))
        if again:
            self.emit("{")
            self._depth += 1
        render()
        if again:
            self._depth -= 1
            self.emit("}")

    def stmt_LetStmt(self, s: S.LetStmt) -> None:
        self.scoped(s.var, lambda: self._let(s))

    def _let(self, s: S.LetStmt) -> None:
        if s.var.dtype.is_handle:
            self._elem.setdefault(id(s.var), None)
        const = "" if s.var.dtype.is_handle else "const "
        self.emit(f"{const}{self.type_name(s.var.dtype)} {self.name(s.var)} = {self.expr(s.value)};")
        self.stmt(s.body)

    def stmt_AttrStmt(self, s: S.AttrStmt) -> None:
        # A binding of a thread variable already bound around it is the same index (as on the interpreter).
        if s.attr_key in ("thread_extent", "virtual_thread") and isinstance(s.node, E.IterVar) \
                and id(s.node.var) not in self._bound:
            self._bound.add(id(s.node.var))
            try:
                self.render_thread_extent(s)
            finally:
                self._bound.discard(id(s.node.var))
        else:
            self.stmt(s.body)

    def render_thread_extent(self, s: S.AttrStmt) -> None:
        """A thread binding: the dialect's index expression, or a serial loop over the extent.

        Either way the variable is declared where it is bound, so sibling regions
        binding the same thread (two stages on ``threadIdx.x``) each declare it.
        """
        iv = s.node
        index = self.thread_idx.get(iv.thread_tag)
        ct, v = self.type_name(iv.var.dtype), self.name(iv.var)
        if index is not None:
            def render() -> None:
                self.emit(f"const {ct} {v} = ({ct})({index});")
                self.stmt(s.body)

            self.scoped(iv.var, render)
        else:
            self.block(f"for ({ct} {v} = 0; {v} < {self.expr(s.value)}; ++{v})", s.body)

    def stmt_AssertStmt(self, s: S.AssertStmt) -> None:
        message = s.message.value if isinstance(s.message, E.StringImm) else str(s.message)
        self.emit(f"if (!({self.expr(s.condition)})) {{ {self.fail(message)} }}")
        self.stmt(s.body)

    def stmt_IfThenElse(self, s: S.IfThenElse) -> None:
        if s.else_case is None:
            self.block(f"if ({self.expr(s.condition)})", s.then_case)
        else:
            self.block(f"if ({self.expr(s.condition)})", s.then_case, tail="} else {")
            self._depth += 1
            self.stmt(s.else_case)
            self._depth -= 1
            self.emit("}")

    def stmt_While(self, s: S.While) -> None:
        self.block(f"while ({self.expr(s.condition)})", s.body)

    def stmt_For(self, s: S.For) -> None:
        v, ct = self.name(s.loop_var), self.type_name(s.loop_var.dtype)
        self._declared.add(id(s.loop_var))
        lo, extent = self.expr(s.min), self.expr(s.extent)
        if not is_simple(lo):  # bounds are evaluated once, before the loop
            lo = self.bind(f"{v}_begin", ct, lo)
        hi = extent if lo == "0" else f"{lo} + {extent}"
        if not is_simple(extent):
            hi = self.bind(f"{v}_end", ct, hi)
        parallel = s.kind == S.ForKind.PARALLEL and self.openmp and self._parallel == 0
        if s.kind == S.ForKind.PARALLEL and self.openmp and self._parallel:
            _log.warning("the parallel loop %s runs serially: it is nested in a parallel loop, whose threads "
                         "already occupy the cores", s.loop_var.name)
        if parallel and may_exit(s.body, self.stack_limit):
            self.emit("/* serial: the body calls another function or allocates off the stack */")
            _log.warning("the parallel loop %s runs serially: its body calls another module's function or "
                         "allocates off the stack, whose errors an OpenMP loop cannot return", s.loop_var.name)
            parallel = False
        if parallel:
            self.emit(self.parallel_pragma_for(s, extent))
        elif s.kind == S.ForKind.UNROLLED:
            self.emit(f"#pragma GCC unroll {min(s.extent.value, 65534)}" if isinstance(s.extent, E.IntImm)
                      else "#pragma GCC unroll 8")
        if not parallel:
            self.block(f"for ({ct} {v} = {lo}; {v} < {hi}; ++{v})", s.body)
            return
        mark = len(self._lines) - 1  # the pragma's line
        self._regions += 1
        region = self._region = Region(f"loom_failed_{self._regions}", f"loom_next_{self._regions}")
        self._parallel += 1
        self.emit(f"for ({ct} {v} = {lo}; {v} < {hi}; ++{v}) {{")
        self._depth += 1
        self.stmt(s.body)
        if region.used:
            self.emit(f"{region.label}: ;")
        self._depth -= 1
        self.emit("}")
        self._parallel -= 1
        self._region = None
        if region.used:  # declared before the pragma: shared by the loop's threads
            self._lines.insert(mark, self.indent_unit * self._depth + f"const char *{region.error} = 0;")
            self.emit(f"if ({region.error}) {{ {self.region_failure(region.error)} }}")

    def stmt_BufferStore(self, s: S.BufferStore) -> None:
        buf, t = s.buffer, s.value.dtype
        ptr = self.pointer(buf)
        if t.lanes == 1 or t == buf.dtype:
            self.emit(f"{ptr}[{self.flat_index(buf, s.indices)}] = {self.expr(s.value)};")
            return
        value, v = self.expr(s.value), self.tmp()
        terms = offset_terms(buf, s.indices)
        start = self._contiguous(buf, terms)
        if start is not None:
            size = self._vector_bytes(t, v)
            self.emit(f"{{ {self.type_name(t)} {v} = {value}; memcpy(&{ptr}[{start}], &{v}, {size}); }}")
            return
        decls, offset = self.lane_offsets(buf, terms)
        self.emit(f"{{ {self.type_name(t)} {v} = {value}; {' '.join(decls)} for (int _l = 0; _l < {t.lanes}; ++_l) "
                  f"{ptr}[{offset}] = {v}[_l]; }}")

    def stmt_Allocate(self, s: S.Allocate) -> None:
        self.scoped(s.buffer_var, lambda: self._allocate(s))

    def _allocate(self, s: S.Allocate) -> None:
        ct, v = self.type_name(s.dtype), self.name(s.buffer_var)
        self._elem[id(s.buffer_var)] = s.dtype
        if is_device_allocation(s):  # host code never touches it: no stack fallback
            release = self.allocate_device(s, ct, v)
        elif fits_stack(s, self.stack_limit):
            align = s.annotations.get("alignment", 64)
            self.emit(f"{ct} {v}[{constant_count(s)}] __attribute__((aligned({align})));")
            self.stmt(s.body)
            return
        else:
            release = self.allocate_heap(s, ct, v)
        self._releases.append(release)
        self.stmt(s.body)
        self._releases.pop()
        self.emit(release.at_end)


def is_device_allocation(s: S.Allocate) -> bool:
    """Whether ``s`` holds device memory (annotated with a device type)."""
    return s.annotations.get(DEVICE_TYPE_ANNOTATION) is not None


def may_exit(body: S.Stmt, stack_limit: int) -> bool:
    """Whether ``body`` holds something that may return from the function and cannot go through
    :meth:`StatementRenderer.fail` inside an OpenMP loop: an allocation off the stack (the jump to
    the iteration's end would skip its release), a call of another function."""
    from ..ir.functor import post_order_visit

    found = []

    def visit(n: Any) -> None:
        if isinstance(n, E.Call) and isinstance(n.op, GlobalVar) \
                or isinstance(n, S.Allocate) and (is_device_allocation(n) or not fits_stack(n, stack_limit)):
            found.append(n)

    post_order_visit(body, visit)
    return bool(found)


def constant_count(s: S.Allocate) -> int | None:
    """The element count of a constant-size allocation, else None."""
    count = 1
    for x in s.extents:
        if not isinstance(x, E.IntImm):
            return None
        count *= x.value
    return count


def fits_stack(s: S.Allocate, stack_limit: int) -> bool:
    """Whether ``s`` has a constant size of at most ``stack_limit`` bytes (and is not empty)."""
    count = constant_count(s)
    return count is not None and 0 < count * s.dtype.bytes <= stack_limit

