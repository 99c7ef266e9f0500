"""IR well-formedness: the invariants every pass may assume and must keep.

:func:`verify_well_formed` checks a :class:`PrimFunc` (or every PrimFunc of an
:class:`IRModule`) for what node constructors cannot see on their own:

* **scoping** -- every Var used is defined: a parameter, a var of a
  ``buffer_map`` buffer (data, shape, strides, elem_offset), a For loop var, a
  Let/LetStmt var or an Allocate buffer var in scope, or the var of an IterVar
  bound by an AttrStmt ``thread_extent``/``virtual_thread``;
* **SSA** -- no variable is bound at two binding sites (a thread var may be
  re-bound by a sibling kernel's AttrStmt, never inside its own scope);
* **buffers** -- a buffer read or written is in ``buffer_map`` or its data var
  is defined in scope (an enclosing Allocate, a parameter); index counts match
  the buffer's rank, indices are integers and vector lanes agree;
* **dtypes** -- conditions (If, While, Assert, Select) are bool; For min,
  extent and loop var agree; Let vars match their values; operands agree;
* **loops** -- a ``thread_binding`` loop names its thread.

Nodes built through constructors already satisfy the local dtype rules; the
verifier checks them again because passes and deserialisation can bypass
constructors.  The walk is iterative, so deep IR cannot overflow the stack.

>>> import loom
>>> from loom.ir import For, BufferStore, PrimFunc
>>> A = loom.decl_buffer((8,), "float32", name="A")
>>> i, j = loom.var("i"), loom.var("j")
>>> good = PrimFunc([A.data], For(i, 0, 8, "serial", BufferStore(A, A[i], [i])), buffer_map={A.data: A})
>>> is_well_formed(good)
True
>>> bad = good.with_body(For(i, 0, 8, "serial", BufferStore(A, A[j], [i])))
>>> verify_well_formed(bad, assert_mode=False)
False
"""

from __future__ import annotations

from typing import Any, Callable

from ..errors import LoomTypeError, VerifyError
from . import expr as E
from . import stmt as S
from .buffer import Buffer
from .function import GlobalVar, IRModule, PrimFunc
from .node import Node, traversal_fields

__all__ = ["verify_well_formed", "is_well_formed"]

#: AttrStmt keys whose IterVar node binds its var for the body.
THREAD_BINDING_KEYS = ("thread_extent", "virtual_thread")

Path = tuple  # (parent path or None, segment): rendered only when a problem is found


def _render(path: Path | None) -> str:
    parts: list[str] = []
    while path is not None:
        path, seg = path
        parts.append(seg)
    return "".join(reversed(parts))


class _Checker:
    """Walks one PrimFunc with an explicit work stack, tracking scopes."""

    def __init__(self, func: PrimFunc, root: str, module: IRModule | None) -> None:
        self.func, self.root, self.module = func, root, module
        self.problems: list[str] = []
        self.scope: dict[int, int] = {}  # id(var) -> how many enclosing bindings
        self.sites: dict[int, str] = {}  # id(var) -> where it was first bound
        self.thread_vars: set[int] = set()
        self.reported: set[tuple[str, int]] = set()
        self.declared_buffers = {id(b) for b in func.buffer_map.values()}
        self.keep: list[Any] = []  # bound objects stay alive so their ids stay unique
        self.stack: list[tuple[Callable[..., None], tuple[Any, ...]]] = []

    # -- driver ------------------------------------------------------------
    def run(self) -> list[str]:
        top: Path = (None, self.root)
        self.then(*self.declare_params(top), (self.dispatch, (self.func.body, (top, ".body"))))
        while self.stack:
            fn, args = self.stack.pop()
            fn(*args)
        return self.problems

    def then(self, *tasks: tuple[Callable[..., None], tuple[Any, ...]]) -> None:
        """Schedule ``tasks`` to run in the given order, before anything scheduled earlier."""
        self.stack.extend(reversed(tasks))

    def dispatch(self, node: Any, path: Path) -> None:
        cls = type(node)
        rule = _RULES.get(cls)
        if rule is None:
            rule = next((_RULES[k] for k in cls.__mro__ if k in _RULES), _Checker.generic)
            _RULES[cls] = rule
        rule(self, node, path)

    def problem(self, path: Path | None, message: str) -> None:
        self.problems.append(f"{_render(path)}: {message}")

    def once(self, kind: str, obj: Any) -> bool:
        key = (kind, id(obj))
        if key in self.reported:
            return False
        self.reported.add(key)
        self.keep.append(obj)
        return True

    # -- definitions and scopes --------------------------------------------
    def declare_params(self, top: Path) -> list[tuple[Callable[..., None], tuple[Any, ...]]]:
        """Bring parameters and buffer_map vars into scope; returns the checks still to run."""
        for k, p in enumerate(self.func.params):
            if id(p) in self.scope:
                self.problem((top, f".params[{k}]"), f"parameter {p.name} appears twice in the parameter list")
            self.enter(p, _render((top, f".params[{k}]")))
        # Buffer declarations define their data, shape, stride and offset vars;
        # any compound expression in them may only use vars defined that way.
        compound: list[tuple[Any, Path]] = []
        for handle, buf in self.func.buffer_map.items():
            bpath: Path = (top, f".buffer_map[{handle.name}]")
            if id(buf.data) not in self.scope:
                self.enter(buf.data, _render((bpath, ".data")))
            for field in ("shape", "strides"):
                for k, x in enumerate(getattr(buf, field)):
                    compound.append((x, (bpath, f".{field}[{k}]")))
            compound.append((buf.elem_offset, (bpath, ".elem_offset")))
        for x, xpath in compound:
            if isinstance(x, E.Var) and id(x) not in self.scope:
                self.enter(x, _render(xpath))
        return [(self.dispatch, (x, xpath)) for x, xpath in compound if not isinstance(x, E.Var)]

    def enter(self, v: E.Var, where: str) -> None:
        self.scope[id(v)] = self.scope.get(id(v), 0) + 1
        self.sites.setdefault(id(v), where)
        self.keep.append(v)

    def bind(self, v: Any, path: Path, thread: bool = False) -> None:
        """A binding site: check SSA, then bring ``v`` into scope."""
        first = self.sites.get(id(v))
        if first is not None:
            sibling_kernel = thread and id(v) in self.thread_vars and id(v) not in self.scope
            if not sibling_kernel:
                what = "re-bound inside its own scope" if id(v) in self.scope else "bound twice"
                self.problem(path, f"variable {v.name} is {what} (SSA): first bound at {first}")
        if thread:
            self.thread_vars.add(id(v))
        self.enter(v, _render(path))

    def leave(self, v: Any) -> None:
        n = self.scope[id(v)] - 1
        if n:
            self.scope[id(v)] = n
        else:
            del self.scope[id(v)]

    def scoped(self, v: Any, path: Path, body: Any, body_path: Path, thread: bool = False) -> None:
        self.then((self.bind, (v, path, thread)), (self.dispatch, (body, body_path)), (self.leave, (v,)))

    # -- generic rules -------------------------------------------------------
    def generic(self, node: Any, path: Path) -> None:
        if not isinstance(node, Node):
            return
        tasks = []
        for f in traversal_fields(type(node)):
            v = getattr(node, f.name)
            if isinstance(v, Node):
                tasks.append((self.dispatch, (v, (path, f".{f.name}"))))
            elif isinstance(v, tuple):
                tasks.extend((self.dispatch, (x, (path, f".{f.name}[{k}]"))) for k, x in enumerate(v)
                             if isinstance(x, Node))
        self.then(*tasks)

    def use_var(self, v: E.Var, path: Path) -> None:
        if id(v) in self.scope or not self.once("var", v):
            return
        first = self.sites.get(id(v))
        if first is not None:
            self.problem(path, f"variable {v.name} is used outside the scope of its binding at {first}")
        else:
            self.problem(path, f"variable {v.name} is not defined: it is not a parameter, a buffer_map "
                               "buffer var, or bound by an enclosing loop, let, allocation or thread binding")

    def expect_bool(self, cond: Any, what: str, path: Path, lanes: int = 1) -> None:
        t = cond.dtype
        if not t.is_bool or t.lanes not in (1, lanes):
            shape = "a scalar bool" if lanes == 1 else f"bool or boolx{lanes}"
            self.problem(path, f"{what} must be {shape}, got {t}")

    def binary(self, e: Any, path: Path) -> None:
        name = type(e).__name__
        if e.a.dtype != e.b.dtype:
            self.problem(path, f"{name} operands differ in dtype: {e.a.dtype} and {e.b.dtype}")
        if isinstance(e, (E.And, E.Or)) and not (e.a.dtype.is_bool and e.b.dtype.is_bool):
            self.problem(path, f"{name} needs bool operands, got {e.a.dtype} and {e.b.dtype}")
        self.generic(e, path)

    def logical_not(self, e: E.Not, path: Path) -> None:
        self.expect_bool(e.a, "Not operand", path, e.a.dtype.lanes)
        self.generic(e, path)

    # -- buffers -------------------------------------------------------------
    def use_buffer(self, b: Buffer, path: Path) -> None:
        if id(b) in self.declared_buffers:
            return
        bpath: Path = (path, ".buffer")
        if id(b.data) not in self.scope and self.once("buffer", b):
            self.problem(bpath, f"buffer {b.name} is not declared: it is not in buffer_map and its data var "
                                f"{b.data.name} is neither a parameter nor allocated by an enclosing Allocate")
        fields = [(x, f".{name}[{k}]") for name in ("shape", "strides") for k, x in enumerate(getattr(b, name))]
        fields.append((b.elem_offset, ".elem_offset"))
        self.then(*((self.dispatch, (x, (bpath, seg))) for x, seg in fields))

    def indices(self, what: str, b: Buffer, idx: tuple[Any, ...], path: Path) -> int:
        """Check an access's indices; returns their vector lanes."""
        if len(idx) != len(b.shape):
            self.problem(path, f"{what} {b.name} has {len(idx)} indices for a {len(b.shape)}-d buffer")
        lanes = {1}
        for k, i in enumerate(idx):
            if not i.dtype.is_integer:
                self.problem((path, f".indices[{k}]"),
                             f"index {k} of {b.name} has dtype {i.dtype}; indices must be integers")
            lanes.add(i.dtype.lanes)
        if len(lanes) > 2:
            self.problem(path, f"vector indices of {b.name} disagree in lanes: {sorted(lanes - {1})}")
        return max(lanes)

    # -- node rules ------------------------------------------------------------
    def buffer_load(self, e: E.BufferLoad, path: Path) -> None:
        self.use_buffer(e.buffer, path)
        self.indices("load from", e.buffer, e.indices, path)
        self.generic(e, path)

    def buffer_store(self, s: S.BufferStore, path: Path) -> None:
        b = s.buffer
        self.use_buffer(b, path)
        lanes = self.indices("store to", b, s.indices, path)
        want = b.dtype.with_lanes(b.dtype.lanes * lanes)
        if s.value.dtype != want:
            self.problem((path, ".value"), f"store to {b.name}: value is {s.value.dtype} but the indices "
                                           f"select {want} ({want.lanes} lane{'s' if want.lanes > 1 else ''})")
        self.generic(s, path)

    def for_loop(self, s: S.For, path: Path) -> None:
        v = s.loop_var
        if not v.dtype.is_integer or v.dtype.lanes != 1:
            self.problem(path, f"loop var {v.name} has dtype {v.dtype}; loop vars must be scalar integers")
        for name in ("min", "extent"):
            if getattr(s, name).dtype != v.dtype:
                self.problem((path, f".{name}"), f"For {v.name}: {name} is {getattr(s, name).dtype} "
                                                 f"but the loop var is {v.dtype}")
        if s.kind is S.ForKind.THREAD_BINDING and not s.thread_tag:
            self.problem(path, f"thread_binding loop {v.name} has no thread_tag (e.g. 'threadIdx.x')")
        self.then((self.dispatch, (s.min, (path, ".min"))), (self.dispatch, (s.extent, (path, ".extent"))),
                  (self.scoped, (v, (path, ".loop_var"), s.body, (path, ".body"))))

    def let(self, node: Any, path: Path) -> None:
        v = node.var
        if v.dtype != node.value.dtype:
            self.problem(path, f"let var {v.name} is {v.dtype} but its value is {node.value.dtype}")
        self.then((self.dispatch, (node.value, (path, ".value"))),
                  (self.scoped, (v, (path, ".var"), node.body, (path, ".body"))))

    def allocate(self, s: S.Allocate, path: Path) -> None:
        if not s.buffer_var.dtype.is_handle:
            self.problem(path, f"Allocate {s.buffer_var.name}: buffer_var must be a handle, got {s.buffer_var.dtype}")
        self.expect_bool(s.condition, "Allocate condition", (path, ".condition"))
        tasks = [(self.dispatch, (x, (path, f".extents[{k}]"))) for k, x in enumerate(s.extents)]
        self.then(*tasks, (self.dispatch, (s.condition, (path, ".condition"))),
                  (self.scoped, (s.buffer_var, (path, ".buffer_var"), s.body, (path, ".body"))))

    def attr(self, s: S.AttrStmt, path: Path) -> None:
        value: tuple[Callable[..., None], tuple[Any, ...]] = (self.dispatch, (s.value, (path, ".value")))
        if s.attr_key not in THREAD_BINDING_KEYS:
            # The node is what the attribute is about (often a buffer var declared
            # just below, as in storage_scope); it is a reference, not a use.
            self.then(value, (self.dispatch, (s.body, (path, ".body"))))
            return
        iv = s.node
        if not isinstance(iv, E.IterVar):
            self.problem((path, ".node"), f"{s.attr_key} must annotate an IterVar, got {type(iv).__name__}")
            self.then(value, (self.dispatch, (s.body, (path, ".body"))))
            return
        if not s.value.dtype.is_integer:
            self.problem((path, ".value"), f"{s.attr_key} of {iv.var.name} must be an integer, got {s.value.dtype}")
        tasks = [value]
        if iv.dom is not None:
            tasks.append((self.dispatch, (iv.dom, (path, ".node.dom"))))
        self.then(*tasks, (self.scoped, (iv.var, (path, ".node.var"), s.body, (path, ".body"), True)))

    def conditional(self, node: Any, path: Path) -> None:
        self.expect_bool(node.condition, f"{type(node).__name__} condition", (path, ".condition"))
        self.generic(node, path)

    def select(self, e: E.Select, path: Path) -> None:
        self.expect_bool(e.condition, "Select condition", (path, ".condition"), e.dtype.lanes)
        if e.true_value.dtype != e.false_value.dtype:
            self.problem(path, f"Select branches differ in dtype: {e.true_value.dtype} and {e.false_value.dtype}")
        self.generic(e, path)

    def call(self, e: E.Call, path: Path) -> None:
        op = e.op
        if isinstance(op, GlobalVar):
            if self.module is not None and op.name_hint not in self.module.functions:
                self.problem(path, f"call of @{op.name_hint}, which is not a function of the module")
        elif op.info.num_inputs >= 0 and len(e.args) != op.info.num_inputs:
            self.problem(path, f"call of {op.name} with {len(e.args)} arguments; it takes {op.info.num_inputs}")
        self.generic(e, path)


_RULES: dict[type, Callable[[_Checker, Any, Any], None]] = {
    E.Var: _Checker.use_var,
    Buffer: lambda checker, node, path: None,  # checked where it is accessed (use_buffer)
    E.BinaryOp: _Checker.binary,
    E.Not: _Checker.logical_not,
    E.Select: _Checker.select,
    E.BufferLoad: _Checker.buffer_load,
    E.Let: _Checker.let,
    E.Call: _Checker.call,
    S.LetStmt: _Checker.let,
    S.For: _Checker.for_loop,
    S.BufferStore: _Checker.buffer_store,
    S.Allocate: _Checker.allocate,
    S.AttrStmt: _Checker.attr,
    S.IfThenElse: _Checker.conditional,
    S.While: _Checker.conditional,
    S.AssertStmt: _Checker.conditional,
}


def _functions(x: Any) -> tuple[list[tuple[str, PrimFunc]], IRModule | None]:
    if isinstance(x, PrimFunc):
        return [(str(x.attrs.get("global_symbol", "main")), x)], None
    if isinstance(x, IRModule):
        return [(name, f) for name, f in sorted(x.functions.items()) if isinstance(f, PrimFunc)], x
    raise LoomTypeError(f"verify_well_formed expects a PrimFunc or an IRModule, got {type(x).__name__}")


def verify_well_formed(func_or_mod: PrimFunc | IRModule, *, assert_mode: bool = True) -> bool:
    """Check that a PrimFunc (or every PrimFunc of an IRModule) is well formed.

    Returns True when it is.  Otherwise raises :class:`~loom.errors.VerifyError`
    listing every problem with where it is (``main.body.seq[1].value: ...``),
    or returns False when ``assert_mode`` is False.  The error's ``problems``
    attribute holds the individual messages.

    >>> import loom
    >>> from loom.ir import PrimFunc, Evaluate
    >>> n = loom.var("n")
    >>> try:
    ...     verify_well_formed(PrimFunc([], Evaluate(n + 1)))
    ... except loom.VerifyError as err:
    ...     print(err.problems[0][:38])
    main.body.value.a: variable n is not d
    """
    funcs, module = _functions(func_or_mod)
    problems: list[str] = []
    for name, f in funcs:
        problems.extend(_Checker(f, name, module).run())
    if not problems:
        return True
    if assert_mode:
        what = f"{type(func_or_mod).__name__} {funcs[0][0]!r}" if module is None else "IRModule"
        lines = "\n".join(f"  - {p}" for p in problems)
        plural = "s" if len(problems) > 1 else ""
        err = VerifyError(f"{what} is not well formed ({len(problems)} problem{plural}):\n{lines}")
        err.problems = problems  # type: ignore[attr-defined]
        raise err
    return False


def is_well_formed(func_or_mod: PrimFunc | IRModule) -> bool:
    """``verify_well_formed(x, assert_mode=False)``: True when ``x`` is well formed."""
    return verify_well_formed(func_or_mod, assert_mode=False)
