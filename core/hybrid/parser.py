"""The hybrid script parser: a Python function's AST to a statement over tensors.

:class:`HybridParser` is an ``ast.NodeVisitor``.  Its ``visit`` turns every
Loom error raised while handling a node into a :class:`HybridSyntaxError` at
that node, and ``generic_visit`` rejects any syntax without a handler, so
every error points at the user's line.  The result, :class:`Parsed`, is the
body (``ProducerStore`` / ``ProducerLoad`` on tensors, ``For`` loops,
``ProducerRealize`` of scratch tensors) and the output placeholders.

Blocks build their statement from the end: a let binding or an assertion
encloses the rest of its block; tensors a block declares are realized around
the whole block (scoping makes them invisible outside it).
"""

from __future__ import annotations

import ast
import types
from dataclasses import dataclass
from typing import Any, Callable, Optional

from ..errors import LoomError
from ..ir import expr as E
from ..ir import expr_ops as ops
from ..ir.container import Array
from ..ir.producer import ProducerLoad, ProducerRealize, ProducerStore
from ..ir.stmt import AssertStmt, IfThenElse, LetStmt, Stmt, no_op, seq
from ..te.operation import placeholder
from ..te.tensor import Tensor
from .calls import CALLS, LANGUAGE_CALLS, LOOP_KINDS, NewTensor, cast_handler
from .errors import HybridSyntaxError, Source
from .expr import ExprMixin, describe, is_number
from .loops import LoopMixin
from .scope import Scopes, Symbol

__all__ = ["HybridParser", "Parsed", "usage"]

_SYNTAX_NAMES = {
    ast.While: "while loops", ast.With: "with statements", ast.Lambda: "lambda", ast.ListComp: "list comprehensions",
    ast.FunctionDef: "nested function definitions", ast.Try: "try statements", ast.Global: "global statements",
    ast.Nonlocal: "nonlocal statements", ast.Break: "break", ast.Continue: "continue", ast.Delete: "del",
    ast.Starred: "starred expressions", ast.JoinedStr: "f-strings", ast.Dict: "dict displays",
    ast.Import: "import statements", ast.ImportFrom: "import statements", ast.AnnAssign: "annotated assignments",
    ast.NamedExpr: "assignment expressions (:=)", ast.Set: "set displays", ast.ClassDef: "class definitions",
}


@dataclass
class Parsed:
    """A parsed hybrid call: its body, output placeholders (in return order) and input tensors."""

    body: Stmt
    outputs: list[Tensor]
    inputs: list[Tensor]


class _Wrap:
    """A statement enclosing the rest of its block (a let binding, an assertion)."""

    def __init__(self, fn: Callable[[Stmt], Stmt]) -> None:
        self.fn = fn


class _Inlined:
    """A called hybrid function: its body and its results, declared by the assignment."""

    description = "the results of a hybrid function call; assign them to names"

    def __init__(self, parsed: Parsed) -> None:
        self.parsed = parsed


_NOT_CONSTANT = object()


def _constant(value: Any) -> Any:
    """A value captured from the enclosing Python scope as the parser holds it, or ``_NOT_CONSTANT``.

    Numbers, strings and expressions stay themselves (numpy scalars become Python numbers); a list
    or tuple becomes a tuple of such values (nested ones too), a constant container that only
    constant indices (const_range loop variables) can index.
    """
    if isinstance(value, (bool, int, float, str, E.PrimExpr)):
        return value
    if hasattr(value, "item") and callable(value.item) and getattr(value, "ndim", None) == 0:
        return value.item()  # a numpy scalar
    if isinstance(value, (list, tuple)):
        items = tuple(_constant(v) for v in value)
        return _NOT_CONSTANT if any(v is _NOT_CONSTANT for v in items) else items
    return _NOT_CONSTANT


def _is_dtype_constant(obj: Any) -> bool:
    """A callable dtype of loom.language (``T.float32``): calling it casts."""
    from ..language.dtypes import dtype_constant  # lazy: loom.language imports the hybrid package

    return isinstance(obj, dtype_constant)


def usage(fdef: ast.FunctionDef) -> tuple[set[str], set[str]]:
    """``(mutable, output_params)``: names stored more than once, and parameters assigned ``output_tensor(...)``."""
    stores: dict[str, int] = {}
    outputs: set[str] = set()
    for node in ast.walk(fdef):
        targets: list[ast.AST] = []
        if isinstance(node, ast.Assign):
            targets = list(node.targets)
            value = node.value
            if isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and value.func.id == "output_tensor":
                outputs.update(t.id for t in targets if isinstance(t, ast.Name))
        elif isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Name):
            stores[node.target.id] = stores.get(node.target.id, 0) + 2
        for t in targets:
            for name in (t.elts if isinstance(t, ast.Tuple) else [t]):
                if isinstance(name, ast.Name):
                    stores[name.id] = stores.get(name.id, 0) + 1
    params = {a.arg for a in fdef.args.args}
    return {n for n, k in stores.items() if k > 1}, outputs & params


class HybridParser(ExprMixin, LoopMixin, ast.NodeVisitor):
    """Parses one call of a hybrid function; ``params`` maps each parameter to its argument."""

    def __init__(self, src: Source, fdef: ast.FunctionDef, params: dict[str, Any], closure: dict[str, Any]) -> None:
        self.src, self.fdef, self.closure = src, fdef, closure
        self.mutable, output_params = usage(fdef)
        self.scopes = Scopes()
        self.roles: dict[int, tuple[str, ast.AST]] = {}  # declared tensor -> (role, declaring node)
        self.outputs: Optional[list[Tensor]] = None
        self.inputs: list[Tensor] = []
        for name, value in params.items():
            if name in output_params:
                continue  # the body declares it
            self.add_inputs(value)
            kind = "input" if isinstance(value, Tensor) else "value"
            self.scopes.declare(name, Symbol(kind, value, None))

    def add_inputs(self, value: Any) -> None:
        """Record the tensors of an argument as inputs: the tensor itself, or those of a container."""
        if isinstance(value, Tensor):
            if all(value is not t for t in self.inputs):
                self.inputs.append(value)
        elif isinstance(value, (Array, tuple)):
            for item in value:
                self.add_inputs(item)

    # -- driver -------------------------------------------------------------------------------
    def parse(self) -> Parsed:
        body = self.block(self.fdef.body, top=True)
        assert self.outputs is not None  # block(top=True) refuses a function without a return
        return Parsed(body, self.outputs, self.inputs)

    def error(self, node: Optional[ast.AST], reason: str) -> HybridSyntaxError:
        return self.src.error(node, reason)

    def visit(self, node: ast.AST) -> Any:
        try:
            return super().visit(node)
        except (HybridSyntaxError, RecursionError):  # too deep: loom.ir.recursion reports it
            raise
        except LoomError as err:
            raise self.error(node, str(err)) from err
        except Exception as err:  # a bug of ours: still say which line triggered it
            raise self.error(node, f"internal error: {type(err).__name__}: {err}") from err

    def generic_visit(self, node: ast.AST) -> Any:
        what = _SYNTAX_NAMES.get(type(node), type(node).__name__)
        raise self.error(node, f"unsupported syntax: {what} are not part of hybrid script"
                         if what[-1:] == "s" else f"unsupported syntax: {what} is not part of hybrid script")

    def block(self, stmts: list[ast.stmt], symbols: Optional[dict[str, Symbol]] = None, top: bool = False) -> Stmt:
        """The statement of a block; ``symbols`` are declared in it first (a loop's variable)."""
        if not top:
            self.scopes.push()
        for name, sym in (symbols or {}).items():
            self.scopes.declare(name, sym)
        items = []
        for k, s in enumerate(stmts):
            if isinstance(s, ast.Return) and not (top and k == len(stmts) - 1):
                raise self.error(s, "return must be the last statement of the hybrid function, at its top level")
            items.append(self.visit(s))
        frame = self.scopes.top if top else self.scopes.pop()
        if top and self.outputs is None:
            raise self.error(self.fdef, f"hybrid function {self.fdef.name} has no return statement; end it with "
                                        f"`return` of its output tensors")
        body: Optional[Stmt] = None
        for item in reversed(items):
            if isinstance(item, _Wrap):
                body = item.fn(body if body is not None else no_op())
            elif item is not None:
                body = item if body is None else seq(item, body)
        body = body if body is not None else no_op()
        outputs = self.outputs or []
        for t, scope in reversed(frame.realize):
            if top and any(t is o for o in outputs):
                continue
            role, node = self.roles[id(t)]
            if role == "output":
                raise self.error(node, f"output tensor {t.name} is never returned; return it, or make it "
                                       f"scratch space with allocate()")
            bounds = [E.Range(ops.const(0, s.dtype), s) for s in t.shape]
            body = ProducerRealize(t, bounds, ops.const(True), body, scope)
        return body

    # -- names --------------------------------------------------------------------------------
    def free_name(self, node: ast.Name) -> Any:
        """A name no block declares: a keyword, or a value of the enclosing Python scope."""
        name = node.id
        if name in self.scopes.retired:
            decl = self.scopes.retired[name]
            line = f" (declared at line {self.src.first_line + getattr(decl, 'lineno', 1) - 1})" \
                if decl is not None else ""
            raise self.error(node, f"{name} is used outside the block that declares it{line}: in hybrid script a "
                                   f"variable lives in the block of its first assignment; assign it before the "
                                   f"loop or if to use it here")
        if name in LOOP_KINDS or name in CALLS:
            raise self.error(node, f"keyword {name} must be called ({name}(...))")
        if name not in self.closure:
            raise self.error(node, f"unknown name {name!r}")
        value = self.closure[name]
        if hasattr(value, "__loom_hybrid__"):
            return value
        found = _constant(value)
        if found is _NOT_CONSTANT:
            raise self.error(node, f"{name} is {describe(value)} from the enclosing Python scope; hybrid script can "
                                   f"use numbers, strings, loom expressions, tuples and lists of them, and hybrid "
                                   f"functions from there (pass tensors as arguments)")
        return found

    def closure_attribute(self, node: ast.Attribute) -> Any:
        """The value of ``mod.attr...`` when its root is a module of the enclosing scope (``T.float32``),
        else ``_NOT_CONSTANT``."""
        chain: list[str] = []
        base: ast.AST = node
        while isinstance(base, ast.Attribute):
            chain.append(base.attr)
            base = base.value
        if not isinstance(base, ast.Name) or self.scopes.lookup(base.id) is not None or base.id in self.scopes.retired:
            return _NOT_CONSTANT
        obj = self.closure.get(base.id, _NOT_CONSTANT)
        if not isinstance(obj, types.ModuleType):
            return _NOT_CONSTANT
        for attr in reversed(chain):
            obj = getattr(obj, attr, _NOT_CONSTANT)
            if obj is _NOT_CONSTANT:
                raise self.error(node, f"module {base.id} has no attribute {attr!r}")
        return obj

    def resolve_keyword(self, func: ast.AST) -> Any:
        """The loom.language keyword (or dtype constant) a callee names, however it is reached; else None."""
        if isinstance(func, ast.Name):
            if self.scopes.lookup(func.id) is not None or func.id in self.scopes.retired:
                return None
            obj = self.closure.get(func.id)
        elif isinstance(func, ast.Attribute):
            obj = self.closure_attribute(func)
        else:
            return None
        return obj if getattr(obj, "__loom_keyword__", False) or _is_dtype_constant(obj) else None

    def visit_Attribute(self, node: ast.Attribute) -> Any:
        found = self.closure_attribute(node)
        if found is _NOT_CONSTANT:
            return super().visit_Attribute(node)
        if getattr(found, "__loom_keyword__", False):
            raise self.error(node, f"keyword {self.segment(node)} must be called ({self.segment(node)}(...))")
        if hasattr(found, "__loom_hybrid__"):
            return found
        value = _constant(found)
        if value is _NOT_CONSTANT:
            raise self.error(node, f"{self.segment(node)} is {describe(found)}; hybrid script can use numbers, "
                                   f"strings, loom expressions and tuples of them from modules")
        return value

    def keyword_call(self, kw: Any, node: ast.Call) -> Any:
        """A call of a loom.language keyword: its hybrid keyword's handler, on adapted arguments."""
        if getattr(kw, "loop", False):
            raise self.error(node, f"{self.segment(node.func)}() makes a loop: use it as "
                                   f"`for i in {self.segment(node.func)}(...)`")
        args = [self.visit(a) for a in node.args]
        kwargs = {k.arg: self.visit(k.value) for k in node.keywords}
        if _is_dtype_constant(kw):
            return cast_handler(str(kw))(self, node, args, kwargs)
        if kw.adapt is not None:
            args, kwargs = kw.adapt(self, node, args, kwargs)
        handler = CALLS.get(kw.hybrid) or LANGUAGE_CALLS[kw.hybrid]
        return handler(self, node, args, kwargs)

    def declare_tensor(self, name: str, t: Tensor, role: str, scope: str, node: ast.AST) -> None:
        self.scopes.declare(name, Symbol("buffer", t, node))
        self.roles[id(t)] = (role, node)
        self.scopes.top.realize.append((t, scope))

    # -- assignments -----------------------------------------------------------------------------
    def visit_Assign(self, node: ast.Assign) -> Any:
        if len(node.targets) != 1:
            raise self.error(node, "chained assignment (a = b = ...) is not supported")
        target = node.targets[0]
        value = self.visit(node.value)
        if isinstance(target, ast.Tuple):
            return self.assign_results(target, value, node)
        if isinstance(value, _Inlined):
            return self.assign_results(ast.Tuple(elts=[target]), value, node)
        if isinstance(target, ast.Subscript):
            return self.store_element(target, value, node.value)
        if isinstance(target, ast.Name):
            return self.assign_name(target, value, node)
        raise self.error(target, "unsupported assignment target: assign to a name or to tensor[index]")

    def assign_results(self, target: ast.Tuple, value: Any, node: ast.Assign) -> Any:
        if not isinstance(value, _Inlined):
            raise self.error(target, "tuple assignment is only for the results of a hybrid function call")
        outs = value.parsed.outputs
        names = [n for n in target.elts if isinstance(n, ast.Name)]
        if len(names) != len(outs) or len(names) != len(target.elts):
            raise self.error(target, f"the call returns {len(outs)} tensor(s); assign them to as many names")
        for n, t in zip(names, outs):
            self.check_new_name(n)
            self.declare_tensor(n.id, t, "result", "global", n)
        return value.parsed.body

    def check_new_name(self, target: ast.Name) -> None:
        sym = self.scopes.lookup(target.id)
        if sym is not None:
            raise self.error(target, self.reassign_reason(target.id, sym))

    def reassign_reason(self, name: str, sym: Symbol) -> str:
        return {
            "loop": f"cannot assign to the loop variable {name}",
            "input": f"{name} is an input tensor; tensors are declared once (write elements: {name}[i] = ...)",
            "buffer": f"{name} is a tensor; tensors are declared once (write elements: {name}[i] = ...)",
        }.get(sym.kind, f"{name} is assigned once only" if sym.node is not None else
              f"cannot assign to the parameter {name}; copy it into a new variable first")

    def assign_name(self, target: ast.Name, value: Any, node: ast.Assign) -> Any:
        name = target.id
        sym = self.scopes.lookup(name)
        if sym is not None:
            if sym.kind == "var":
                return self.store_var(sym, value, node.value)
            raise self.error(target, self.reassign_reason(name, sym))
        if isinstance(value, NewTensor):
            if value.role == "output" and self.scopes.depth > 1:
                raise self.error(node, "output_tensor must be declared at the top level of the function, not "
                                       "inside a loop or an if")
            t = placeholder(value.shape, value.dtype, name=name)
            self.declare_tensor(name, t, value.role, value.scope, target)
            return None
        if name in self.mutable:
            init = self.expr(value, node.value)
            t = placeholder((1,), init.dtype, name=name)
            self.scopes.declare(name, Symbol("var", t, target))
            self.scopes.top.realize.append((t, "local"))
            self.roles[id(t)] = ("var", target)
            return ProducerStore(t, init, [ops.const(0)])
        if isinstance(value, E.PrimExpr) and not isinstance(value, (E.Var, E.IntImm, E.FloatImm, E.StringImm)):
            v = E.Var(name, value.dtype)
            self.scopes.declare(name, Symbol("value", v, target))
            return _Wrap(lambda body: LetStmt(v, value, body))
        self.scopes.declare(name, Symbol("value", value, target))
        return None

    def store_var(self, sym: Symbol, value: Any, node: ast.AST) -> Stmt:
        t: Tensor = sym.value
        v = self.scalar(value, node)
        if is_number(v) and not (isinstance(v, float) and not t.dtype.is_float):
            v = self.typed(v, t.dtype)
        v = ops.convert_expr(v)
        if v.dtype != t.dtype:
            if v.dtype.is_float != t.dtype.is_float or v.dtype.is_bool != t.dtype.is_bool:
                decl = getattr(sym.node, "lineno", 1) + self.src.first_line - 1
                raise self.error(node, f"variable {t.name} is {t.dtype} (declared at line {decl}) but is assigned "
                                       f"a {v.dtype} value; a variable keeps the dtype of its first assignment "
                                       f"(write 0.0 to declare a float)")
            v = ops.cast(v, t.dtype)
        return ProducerStore(t, v, [ops.const(0)])

    def store_element(self, target: ast.Subscript, value: Any, value_node: ast.AST) -> Stmt:
        t = self.visit(target.value)
        if not isinstance(t, Tensor):
            raise self.error(target.value, f"{self.segment(target.value)} is {describe(t)} and cannot be written")
        # An input may be written, as in TVM: the write goes to the caller's tensor (docs/hybrid.md, In-place).
        idx = self.indices(target.slice, t)
        return ProducerStore(t, self.typed(self.scalar(value, value_node), t.dtype), idx)

    def visit_AugAssign(self, node: ast.AugAssign) -> Any:
        target = node.target
        value = self.scalar(self.visit(node.value), node.value)
        if isinstance(target, ast.Name):
            sym = self.scopes.lookup(target.id)
            if sym is None:
                if target.id in self.scopes.retired:
                    self.free_name(target)
                raise self.error(target, f"{target.id} is updated before it is declared; assign it first")
            if sym.kind != "var":
                raise self.error(target, self.reassign_reason(target.id, sym))
            current = ProducerLoad(sym.value, [ops.const(0)])
            return self.store_var(sym, self.arith(node.op, current, value, node), node)
        if isinstance(target, ast.Subscript):
            t = self.visit(target.value)
            if isinstance(t, Tensor):
                current = ProducerLoad(t, self.indices(target.slice, t))
                return self.store_element(target, self.arith(node.op, current, value, node), node.value)
        raise self.error(target, "unsupported assignment target: update a variable or tensor[index]")

    # -- control flow ------------------------------------------------------------------------------
    def visit_If(self, node: ast.If) -> Any:
        c = self.condition(self.visit(node.test), node.test)
        if isinstance(c, bool):  # decided while parsing: only the taken branch exists
            taken = node.body if c else node.orelse
            return self.block(taken) if taken else None
        then = self.block(node.body)
        other = self.block(node.orelse) if node.orelse else None
        return IfThenElse(c, then, other)

    def visit_Assert(self, node: ast.Assert) -> Any:
        c = self.condition(self.visit(node.test), node.test)
        if node.msg is None:
            msg = f"assertion failed: {self.segment(node.test)}"
        else:
            msg = self.visit(node.msg)
            if not isinstance(msg, str):
                raise self.error(node.msg, "the message of an assert must be a string")
        if c is True:
            return None
        cond = ops.const(False) if c is False else c
        return _Wrap(lambda body: AssertStmt(cond, msg, body))

    def visit_Return(self, node: ast.Return) -> Any:
        if node.value is None:
            raise self.error(node, "return the output tensors of the hybrid function")
        items = node.value.elts if isinstance(node.value, ast.Tuple) else [node.value]
        outputs: list[Tensor] = []
        for item in items:
            t = self.visit(item)
            role = self.roles.get(id(t), ("", None))[0] if isinstance(t, Tensor) else ""
            if role not in ("output", "result"):
                kind = {"allocate": "a scratch tensor made by allocate()", "var": "a variable"}.get(role, describe(t))
                raise self.error(item, f"a hybrid function returns tensors made by output_tensor (or returned by a "
                                       f"hybrid function it calls); {self.segment(item)} is {kind}")
            if any(t is o for o in outputs):
                raise self.error(item, f"{t.name} is returned twice")
            outputs.append(t)
        self.outputs = outputs
        return None

    def visit_Expr(self, node: ast.Expr) -> Any:
        if isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            return None  # a docstring
        raise self.error(node, "this expression statement has no effect; hybrid statements are assignments, "
                               "loops, ifs, asserts and the final return")

    def visit_Pass(self, node: ast.Pass) -> Any:
        return None

    # -- calls --------------------------------------------------------------------------------------
    def visit_Call(self, node: ast.Call) -> Any:
        func = node.func
        kw = self.resolve_keyword(func)
        if kw is not None:
            return self.keyword_call(kw, node)
        if not isinstance(func, ast.Name):
            raise self.error(func, f"only hybrid keywords and hybrid functions can be called; "
                                   f"{self.segment(func)} is neither")
        name = func.id
        if self.scopes.lookup(name) is None and name in LOOP_KINDS:
            raise self.error(node, f"{name}() makes a loop: use it as `for i in {name}(...)`")
        if self.scopes.lookup(name) is None and name in CALLS:
            args = [self.visit(a) for a in node.args]
            kwargs = {k.arg: self.visit(k.value) for k in node.keywords}
            return CALLS[name](self, node, args, kwargs)
        if self.scopes.lookup(name) is None and name not in self.scopes.retired:
            found = self.closure.get(name)
            if callable(found) and not hasattr(found, "__loom_hybrid__"):
                raise self.error(func, f"{name} is a Python {type(found).__name__}, not a hybrid function: call "
                                       f"hybrid keywords and functions decorated with @loom.hybrid.script only")
        target = self.visit(func)
        if hasattr(target, "__loom_hybrid__"):
            if target.is_parsing():
                raise self.error(func, f"{name} calls itself (directly or through other hybrid functions); "
                                       f"hybrid functions are inlined, so recursion is not supported")
            if node.keywords:
                raise self.error(node, "pass the arguments of a hybrid function call positionally")
            args = [self.visit(a) for a in node.args]
            for a, arg_node in zip(args, node.args):
                if isinstance(a, (NewTensor, _Inlined)):
                    raise self.error(arg_node, "assign this value to a name before passing it")
            return _Inlined(target.parse_call(args))
        raise self.error(func, f"{name} is {describe(target)} and cannot be called")
