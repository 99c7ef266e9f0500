"""``LowerIntrin``: rewrite intrinsic calls through the target's lowering rules.

Every ``Call`` of an :class:`~loom.ir.Op` that has a lowering rule for the
target (:func:`loom.ir.op.lowering_rule`: rules registered for its kind, the
plugins' ``loom_intrinsic_rules(target)``, then the ``default`` kind) is
replaced by ``rule(call)``; calls are lowered innermost first, each once.  Ops
without a rule stay.  The target is the pass's argument (a Target or a kind
name), else the function's ``attrs["target"]``; a function with neither is
left alone.

``floordiv``/``floormod`` of provably non-negative integer operands become
truncating ``Div``/``Mod``, unless the kind's backend says otherwise
(:attr:`loom.backend.Backend.rewrite_floor_division`).

>>> import loom
>>> from loom.ir import BufferStore, PrimFunc, register_lowering
>>> register_lowering("tir.exp", "doc_kind", lambda call: loom.call_extern(call.dtype, "expf", *call.args))
>>> A = loom.decl_buffer((1,), "float32", name="A")
>>> f = PrimFunc([A.data], BufferStore(A, loom.exp(A[0]), [0]), buffer_map={A.data: A})
>>> print(LowerIntrin("doc_kind")(f).body)
A[0] = call_extern('float32', 'expf', A[0])
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..errors import LoomError, LoomTypeError, PluginError
from ..ir import expr as E
from ..ir import stmt as S
from ..arith import Analyzer
from ..ir.functor import Mutator
from ..ir.op import Op, lowering_rule, rule_plugin
from .pass_base import Pass, PassContext, prim_func_pass

if TYPE_CHECKING:
    from ..target import Target

__all__ = ["LowerIntrin", "lower_intrin", "rewrites_floor_division"]


def rewrites_floor_division(kind: str) -> bool:
    """Whether the backend of ``kind`` lets floor division of non-negative operands truncate (yes without one)."""
    from ..backend import get_backend

    try:
        backend, _ = get_backend(kind)
    except PluginError:
        return True
    return bool(backend.rewrite_floor_division)


class _Lower(Mutator):
    def __init__(self, target: Target | str) -> None:
        self.target = target
        self.kind = target if isinstance(target, str) else target.kind_name
        self._rewrite_floor: bool | None = None  # asked of the backend on the first floor division
        # Loop and let bounds, to prove floordiv/floormod operands non-negative.
        self.analyzer = Analyzer()

    def visit_For(self, s: S.For) -> S.Stmt:
        self.analyzer.bind(s.loop_var, E.Range.from_min_extent(s.min, s.extent), allow_override=True)
        return self.generic_visit(s)

    def visit_LetStmt(self, s: S.LetStmt) -> S.Stmt:
        if s.var.dtype.is_int and s.var.dtype.lanes == 1:
            self.analyzer.bind(s.var, s.value, allow_override=True)
        return self.generic_visit(s)

    def visit_AttrStmt(self, s: S.AttrStmt) -> S.Stmt:
        if s.attr_key in ("thread_extent", "virtual_thread") and isinstance(s.node, E.IterVar):
            self.analyzer.bind(s.node.var, E.Range.from_min_extent(0, s.value), allow_override=True)
        return self.generic_visit(s)

    def _non_negative(self, a: E.PrimExpr, b: E.PrimExpr) -> bool:
        if self._rewrite_floor is None:
            self._rewrite_floor = rewrites_floor_division(self.kind)
        return self._rewrite_floor and self.analyzer.const_int_bound(a).min_value >= 0 \
            and self.analyzer.const_int_bound(b).min_value > 0

    # Floor division rounds toward -inf, C's toward zero; on a non-negative dividend and a positive
    # divisor they agree, and the truncating form is one instruction instead of a sign fix-up.
    def visit_FloorDiv(self, e: E.FloorDiv) -> E.PrimExpr:
        out = self.generic_visit(e)
        if isinstance(out, E.FloorDiv) and out.dtype.is_int and self._non_negative(out.a, out.b):
            return E.Div(out.a, out.b)
        return out

    def visit_FloorMod(self, e: E.FloorMod) -> E.PrimExpr:
        out = self.generic_visit(e)
        if isinstance(out, E.FloorMod) and out.dtype.is_int and self._non_negative(out.a, out.b):
            return E.Mod(out.a, out.b)
        return out

    def visit_Call(self, e: E.Call) -> E.PrimExpr:
        out = self.generic_visit(e)
        if not isinstance(out.op, Op):
            return out
        rule = lowering_rule(out.op, self.target)
        if rule is None:
            return out
        try:
            new = rule(out)
        except LoomError:
            raise
        except Exception as err:  # a plugin's rule: name the plugin (and the op) it broke on
            plugin = rule_plugin(out.op, self.target)
            if plugin is None:
                raise
            raise PluginError(f"the {out.op.name} lowering rule of plugin {plugin!r} (loom_intrinsic_rules) raised "
                              f"{type(err).__name__}: {err}") from err
        if new is None:
            return out
        if not isinstance(new, E.PrimExpr) or new.dtype != e.dtype:
            got = f"{new.dtype} expression" if isinstance(new, E.PrimExpr) else type(new).__name__
            raise LoomTypeError(f"the {self.kind!r} lowering rule of {out.op.name} returned a {got}; "
                                f"expected a {e.dtype} expression replacing {e}")
        return new


def lower_intrin(stmt: S.Stmt, target: Target | str) -> S.Stmt:
    """``stmt`` with every intrinsic call that has a rule for ``target`` (a Target or a kind name) lowered."""
    return _Lower(target).visit(stmt)


def LowerIntrin(target: Target | str | None = None) -> Pass:  # noqa: N802 - classic factory name
    """The pass; ``target`` (a Target or a kind name) defaults to each function's ``attrs["target"]``."""

    def run(func: Any, mod: Any, ctx: PassContext) -> Any:
        chosen = target if target is not None else func.attrs.get("target")
        if chosen is None:
            return func
        body = lower_intrin(func.body, chosen)
        return func if body is func.body else func.with_body(body)

    return prim_func_pass(run, name="LowerIntrin")
