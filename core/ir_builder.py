"""An imperative builder of statements: classic TVM's ``tvm.ir_builder``.

Extern operations (:func:`loom.extern`) describe their body as a statement.
Writing nested ``For``/``IfThenElse``/``Allocate`` nodes by hand is tedious; an
:class:`IRBuilder` lets the body be written as Python code instead, each
``with`` block opening a scope whose statements become the body of a loop, a
branch, an allocation or an attribute:

>>> import loom
>>> ib = create()
>>> n = loom.var("n")
>>> A = ib.allocate("float32", n, name="A")
>>> with ib.for_range(0, n, name="i") as i:
...     with ib.if_scope(i % 2 == 0):
...         A[i] = A[i] + 1.0
...     with ib.else_scope():
...         A[i] = A[i] * 2.0
>>> print(ib.get())
A = allocate([n], 'float32', 'global')
for i in range(n):
    if i % 2 == 0:
        A[i] = A[i] + 1.0
    else:
        A[i] = A[i] * 2.0

Memory is reached through a :class:`BufferVar` (from :meth:`IRBuilder.allocate`,
:meth:`IRBuilder.buffer_ptr` or :meth:`IRBuilder.pointer`): ``x[i]`` loads and
``x[i] = v`` stores element ``i`` counted from the data pointer, as TVM's flat
``Load``/``Store`` did.  Loom's IR has no pointer loads, so a BufferVar indexes a
one-dimensional buffer over the same data; for a buffer of several dimensions
:meth:`~IRBuilder.buffer_ptr` binds that view's data pointer with a ``LetStmt``.
"""

from __future__ import annotations

from typing import Any, Callable, Union

from .arith import Analyzer
from .errors import LoomTypeError, LoomValueError
from .ir import expr as E
from .ir import stmt as S
from .ir.buffer import UNKNOWN_EXTENT, Buffer, decl_buffer
from .ir.dtype import DataType
from .ir.expr_ops import cast, const, convert_expr
from .ir.intrin import likely as _likely
from .ir.node import Node

__all__ = ["IRBuilder", "BufferVar", "WithScope", "create"]

#: What a scope holds: statements, and wrappers that take the rest of the scope as their body.
_Item = Union[S.Stmt, Callable[[S.Stmt], S.Stmt]]

#: TVM's ``for_type`` names (and Loom's own loop kinds) to Loom's loop kinds.
_FOR_TYPES = {"serial": "serial", "parallel": "parallel", "vectorize": "vectorized", "vectorized": "vectorized",
              "unroll": "unrolled", "unrolled": "unrolled"}

class WithScope:
    """A ``with`` block of the builder: entering gives ``value``; leaving runs ``on_exit``.

    When the block raises, ``on_exit`` is skipped (the builder is left
    unfinished) so the original error is what the user sees.
    """

    def __init__(self, value: Any, on_exit: Callable[[], None]) -> None:
        self._value = value
        self._on_exit = on_exit

    def __enter__(self) -> Any:
        return self._value

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        if exc_type is None:
            self._on_exit()


class BufferVar:
    """A typed pointer whose ``x[i]`` loads and ``x[i] = v`` stores (emitted to the builder).

    ``i`` counts elements of :attr:`dtype` from the data pointer; for a vector
    dtype (``float32x4``) element ``i`` is the lanes ``4 * i`` to ``4 * i + 3``.
    ``asnode()`` (or using the BufferVar where an expression is expected, e.g.
    as an argument of :func:`loom.call_extern`) gives the ``handle`` Var.

    >>> import loom
    >>> ib = create()
    >>> x = ib.pointer("float32", name="x")
    >>> x[1] = x[0] + 1.0
    >>> str(ib.get()), str(x.dtype), x.asnode().name
    ('x[1] = x[0] + 1.0', 'float32', 'x')
    """

    def __init__(self, builder: IRBuilder, data: E.Var, dtype: DataType, flat: Buffer) -> None:
        self._builder = builder
        self._data = data
        self._dtype = dtype
        self._flat = flat

    @property
    def dtype(self) -> DataType:
        """The content type: what ``x[i]`` loads."""
        return self._dtype

    @property
    def buffer(self) -> Buffer:
        """The one-dimensional buffer of element type that the loads and stores use."""
        return self._flat

    def asnode(self) -> E.Var:
        """The data pointer (a ``handle`` Var)."""
        return self._data

    def as_expr(self) -> E.Var:
        return self._data

    def _index(self, index: Any) -> E.PrimExpr:
        if isinstance(index, tuple):
            raise LoomTypeError(f"{self._flat.name}[...]: a BufferVar takes one flat index, got {len(index)}")
        try:
            idx = convert_expr(index, self._flat.shape[0].dtype if isinstance(index, int) else None)
        except LoomTypeError:
            raise LoomTypeError(f"{self._flat.name}[...]: the index must be an integer expression, "
                                f"got {type(index).__name__}") from None
        if not idx.dtype.is_integer or idx.dtype.lanes != 1:
            raise LoomTypeError(f"{self._flat.name}[...]: the index must be a scalar integer, got {idx.dtype}")
        lanes = self._dtype.lanes
        if lanes == 1:
            return idx
        return E.Ramp(idx * lanes, const(1, idx.dtype), lanes)

    def __getitem__(self, index: Any) -> E.BufferLoad:
        return E.BufferLoad(self._flat, [self._index(index)])

    def __setitem__(self, index: Any, value: Any) -> None:
        if isinstance(value, (bool, int, float)):
            v = convert_expr(value, self._dtype.element_of())
            if self._dtype.lanes > 1:
                v = E.Broadcast(v, self._dtype.lanes)
        else:
            v = convert_expr(value)
        if v.dtype != self._dtype:
            raise LoomTypeError(f"{self._flat.name}[...] = value: the value is {v.dtype} but the content type is "
                                f"{self._dtype}; cast it (loom.cast or .astype)")
        self._builder.emit(S.BufferStore(self._flat, v, [self._index(index)]))

    def __repr__(self) -> str:
        return f"BufferVar({self._data.name}, {self._dtype})"


def _flat_view(data: E.Var, dtype: DataType, extent: Any, name: str, aligned: bool = False) -> Buffer:
    """A compact one-dimensional buffer of ``dtype``'s element type over ``data``.

    Only memory this builder allocates (``aligned``) has Loom's allocation
    alignment; a view of another pointer promises its element's alignment alone
    (an argument's data is aligned to less than a buffer declares by default).
    """
    elem = dtype.element_of()
    align = -1 if aligned else 1 << max(0, (max(elem.bits, 8) // 8 - 1).bit_length())
    return decl_buffer((extent,), elem, name=name, data=data, data_alignment=align)


def _as_dtype(dtype: Any, what: str) -> DataType:
    try:
        return DataType.of(dtype)
    except Exception as err:  # noqa: BLE001 - any parse failure is the user's dtype
        raise LoomTypeError(f"{what}: {dtype!r} is not a dtype ({err})") from None


class IRBuilder:
    """Builds a statement from Python code; see the module docstring.  Make one with :func:`create`."""

    def __init__(self) -> None:
        self._scopes: list[list[_Item]] = [[]]
        self._auto_names = 0

    # -- the scope stack -------------------------------------------------------------
    def _open(self) -> int:
        self._scopes.append([])
        return len(self._scopes)

    def _close(self, depth: int, what: str) -> S.Stmt:
        if len(self._scopes) != depth:
            raise LoomValueError(f"{what}: scopes were closed out of order (use each scope in a with block)")
        return self._pop()

    def _pop(self) -> S.Stmt:
        items = self._scopes.pop()
        body: S.Stmt = S.no_op()
        stmts: list[S.Stmt] = []
        # Build from the end: a wrapper (Allocate, AttrStmt, LetStmt) takes everything after it.
        for item in reversed(items):
            if isinstance(item, S.Stmt):
                stmts.append(item)
                continue
            body = item(S.seq(*reversed(stmts)) if stmts else body)
            stmts = [body]
        return S.seq(*reversed(stmts)) if stmts else body

    def emit(self, stmt: Any) -> None:
        """Append a statement (an expression becomes ``Evaluate(expr)``) to the current scope.

        A callable is a wrapper: it is later called with the rest of the scope
        as its body (how :meth:`allocate` and :meth:`scope_attr` work).

        >>> import loom
        >>> ib = create()
        >>> ib.emit(loom.call_extern("int32", "tick"))
        >>> str(ib.get())
        "call_extern('int32', 'tick')"
        """
        if isinstance(stmt, E.PrimExpr):
            stmt = S.Evaluate(stmt)
        if not isinstance(stmt, S.Stmt) and not callable(stmt):
            raise LoomTypeError(f"emit() takes a Stmt, an expression or a callable building a Stmt from a body, "
                                f"got {type(stmt).__name__}")
        self._scopes[-1].append(stmt)

    def get(self) -> S.Stmt:
        """The statement built so far (call it once, outside every ``with`` block)."""
        if len(self._scopes) != 1:
            raise LoomValueError(f"get() called inside {len(self._scopes) - 1} open scope(s); call it after the "
                                 "with blocks end")
        stmt = self._pop()
        self._scopes.append([])
        return stmt

    # -- scopes ------------------------------------------------------------------------
    def scope_attr(self, node: Any, attr_key: str, value: Any) -> None:
        """Wrap the rest of the current scope in ``AttrStmt(node, attr_key, value)``.

        >>> import loom
        >>> ib = create()
        >>> tx = loom.thread_axis("threadIdx.x")
        >>> ib.scope_attr(tx, "thread_extent", 32)
        >>> x = ib.pointer("float32", name="x")
        >>> x[tx.var] = loom.const(0.0)
        >>> print(ib.get())
        with attr(iter_var(threadIdx.x, None, 'thread_index', 'threadIdx.x'), 'thread_extent', 32):
            x[threadIdx.x] = 0.0
        """
        if isinstance(node, str):
            node = E.StringImm(node)
        elif isinstance(node, BufferVar):
            node = node.asnode()
        if node is not None and not isinstance(node, Node):
            raise LoomTypeError(f"scope_attr: the node must be an IR node or a string, got {type(node).__name__}")
        if not isinstance(attr_key, str):
            raise LoomTypeError(f"scope_attr: the key must be a string, got {type(attr_key).__name__}")
        val = value if isinstance(value, str) else convert_expr(value)
        self.emit(lambda body: S.AttrStmt(node, attr_key, val, body))

    def for_range(self, begin: Any, end: Any, name: str = "i", dtype: Any = "int32",
                  for_type: str = "serial") -> WithScope:
        """A loop from ``begin`` to ``end`` (exclusive); the ``with`` block's value is the loop variable.

        ``for_type`` is ``"serial"``, ``"parallel"``, ``"vectorize"`` or
        ``"unroll"``.  Left at ``"i"``, the name counts up: ``i``, ``j``, ``k``,
        then ``i_0``, ``i_1``... as in TVM.

        >>> import loom
        >>> ib = create()
        >>> x = ib.pointer("float32", name="x")
        >>> with ib.for_range(1, 10) as i:
        ...     x[i] = x[i - 1] + 1.0
        >>> print(ib.get())
        for i in range(1, 10):
            x[i] = x[i - 1] + 1.0
        """
        kind = _FOR_TYPES.get(for_type) if isinstance(for_type, str) else None
        if kind is None:
            raise LoomValueError(f"for_range: unknown for_type {for_type!r}; expected one of "
                                 "'serial', 'parallel', 'vectorize', 'unroll'")
        t = _as_dtype(dtype, "for_range")
        if not t.is_integer or t.lanes != 1:
            raise LoomTypeError(f"for_range: the loop variable must be a scalar integer, got dtype {t}")
        if name == "i":
            name = "ijk"[self._auto_names] if self._auto_names < 3 else f"i_{self._auto_names - 3}"
            self._auto_names += 1
        lo, hi = (self._bound(x, t, what) for x, what in ((begin, "begin"), (end, "end")))
        extent = hi if isinstance(lo, E.IntImm) and lo.value == 0 else Analyzer().simplify(hi - lo)
        loop_var = E.Var(name, t)
        depth = self._open()

        def done() -> None:
            body = self._close(depth, f"for_range {name}")
            self.emit(S.For(loop_var, lo, extent, kind, body))

        return WithScope(loop_var, done)

    @staticmethod
    def _bound(x: Any, t: DataType, what: str) -> E.PrimExpr:
        if isinstance(x, (bool, float)) or (not isinstance(x, (int, E.PrimExpr)) and not hasattr(x, "as_expr")):
            raise LoomTypeError(f"for_range: {what} must be an integer or an integer expression, got {x!r}")
        e = convert_expr(x, t if isinstance(x, int) else None)
        if not e.dtype.is_integer or e.dtype.lanes != 1:
            raise LoomTypeError(f"for_range: {what} must be a scalar integer, got {e.dtype}")
        return e if e.dtype == t else cast(e, t)

    def if_scope(self, cond: Any) -> WithScope:
        """Run the ``with`` block only when ``cond`` holds (an :meth:`else_scope` may follow).

        >>> import loom
        >>> ib = create()
        >>> n, x = loom.var("n"), ib.pointer("int32", name="x")
        >>> with ib.if_scope(n > 0):
        ...     x[0] = n
        >>> print(ib.get())
        if n > 0:
            x[0] = n
        """
        c = convert_expr(cond)
        if not c.dtype.is_bool or c.dtype.lanes != 1:
            raise LoomTypeError(f"if_scope: the condition must be a scalar bool, got {c.dtype} ({c})")
        depth = self._open()

        def done() -> None:
            self.emit(S.IfThenElse(c, self._close(depth, "if_scope"), None))

        return WithScope(None, done)

    def else_scope(self) -> WithScope:
        """The ``else`` branch of the :meth:`if_scope` that ended just before."""
        scope = self._scopes[-1]
        prev = scope[-1] if scope else None
        if not isinstance(prev, S.IfThenElse) or prev.else_case is not None:
            raise LoomValueError("else_scope must directly follow an if_scope (with no else) in the same scope")
        scope.pop()
        depth = self._open()

        def done() -> None:
            self.emit(S.IfThenElse(prev.condition, prev.then_case, self._close(depth, "else_scope")))

        return WithScope(None, done)

    def new_scope(self) -> WithScope:
        """A plain scope: it bounds what an :meth:`allocate`, :meth:`scope_attr` or :meth:`buffer_ptr` covers.

        >>> ib = create()
        >>> with ib.new_scope():
        ...     t = ib.allocate("int32", 4, name="t")
        ...     t[0] = 1
        >>> y = ib.pointer("int32", name="y")
        >>> y[0] = 2
        >>> print(ib.get())
        t = allocate([4], 'int32', 'global')
        t[0] = 1
        y[0] = 2
        """
        depth = self._open()
        return WithScope(None, lambda: self.emit(self._close(depth, "new_scope")))

    # -- memory ------------------------------------------------------------------------
    def allocate(self, dtype: Any, shape: Any, name: str = "buf", scope: str | None = None) -> BufferVar:
        """Allocate ``prod(shape)`` elements of ``dtype`` for the rest of the current scope.

        ``scope`` is the storage scope (``"global"`` when None; ``"local"``,
        ``"shared"`` on GPUs).  Returns the :class:`BufferVar` that reads and
        writes it, indexed flat.
        """
        t = _as_dtype(dtype, f"allocate {name!r}")
        if t.is_handle:
            raise LoomTypeError(f"allocate {name!r}: cannot allocate handles")
        dims = list(shape) if isinstance(shape, (list, tuple)) else [shape]
        if not dims:
            raise LoomValueError(f"allocate {name!r}: the shape is empty")
        extents = []
        for d in dims:
            e = convert_expr(d) if not isinstance(d, (bool, float)) else None
            if e is None or not e.dtype.is_integer or e.dtype.lanes != 1:
                raise LoomTypeError(f"allocate {name!r}: shape entries must be integers, got {d!r}")
            if isinstance(e, E.IntImm) and e.value <= 0:
                raise LoomValueError(f"allocate {name!r}: shape entries must be positive, got {e.value}")
            extents.append(e)
        if t.lanes > 1:  # a vector content type: allocate its elements
            extents[-1] = extents[-1] * t.lanes
        data = E.Var(name, "handle")
        flat = extents[0]
        for e in extents[1:]:
            flat = flat * e
        where = scope or "global"
        self.emit(lambda body: S.Allocate(data, t.element_of(), extents, E.IntImm("bool", 1), body, where))
        return BufferVar(self, data, t, _flat_view(data, t, flat, name, aligned=True))

    def pointer(self, content_type: Any, name: str = "ptr") -> BufferVar:
        """A new ``handle`` Var, read and written as ``content_type`` (a parameter of a function you build).

        Its memory's size is unknown: the view declares the largest int32 extent.
        """
        t = _as_dtype(content_type, f"pointer {name!r}")
        data = E.Var(name, "handle")
        return BufferVar(self, data, t, _flat_view(data, t, const(UNKNOWN_EXTENT // max(t.lanes, 1)), name))

    def buffer_ptr(self, buf: Buffer) -> BufferVar:
        """The flat view of ``buf``: ``p[i]`` is element ``i`` from ``buf``'s data pointer.

        A one-dimensional compact buffer is used as it is; for any other, a
        ``LetStmt`` (wrapping the rest of the current scope) binds the view's
        pointer to ``buf.data``, so lowering that moves ``buf`` to its tensor's
        storage moves the view with it.
        """
        if not isinstance(buf, Buffer):
            raise LoomTypeError(f"buffer_ptr takes a Buffer (e.g. ins[0] of an extern body), got "
                                f"{type(buf).__name__}")
        t = buf.dtype
        simple = buf.ndim == 1 and buf.is_compact and t.lanes == 1 \
            and isinstance(buf.elem_offset, E.IntImm) and buf.elem_offset.value == 0
        if simple:
            return BufferVar(self, buf.data, t, buf)
        view = E.Var(f"{buf.name}_ptr", "handle")
        self.emit(lambda body: S.LetStmt(view, buf.data, body))
        return BufferVar(self, view, t, _flat_view(view, t, _element_count(buf), buf.name))

    def likely(self, expr: Any) -> E.PrimExpr:
        """``expr`` marked as likely true (:func:`loom.likely`)."""
        return _likely(expr)


def _element_count(buf: Buffer) -> E.PrimExpr:
    """How many elements of ``buf``'s element type its memory spans (its first dim times its stride)."""
    lanes = buf.dtype.lanes
    if not buf.shape:
        return const(lanes)
    if buf.strides:
        count: E.PrimExpr = buf.shape[0] * buf.strides[0]
    else:
        count = buf.shape[0]
        for d in buf.shape[1:]:
            count = count * d
    return count * lanes if lanes > 1 else count


def create() -> IRBuilder:
    """A new :class:`IRBuilder`.

    >>> ib = create()
    >>> str(ib.get())
    'pass'
    """
    return IRBuilder()
