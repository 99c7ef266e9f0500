"""Registered intrinsic operators (``Op``) and their per-target lowering rules.

An :class:`Op` is a named intrinsic such as ``tir.exp``.  The core registers
each op once with its arity and a numpy implementation (the reference
interpreter uses it).  Backends contribute *lowering rules*: for a target and
an op, a function that rewrites the ``Call`` into something the backend can
emit (an LLVM intrinsic call, a C function call...).  Rules arrive through the
``loom_intrinsic_rules(target)`` plugin hook, asked once per target;
``register_lowering`` is the direct API, keyed by target kind.

>>> Op.get("tir.exp").name
'tir.exp'
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable

import attrs

from ..errors import LoomError, LoomValueError
from .node import Node, register_object, value

if TYPE_CHECKING:
    from ..target import Target

__all__ = ["Op", "OpInfo", "register_op", "register_lowering", "register_intrin_rule", "lowering_rule", "list_ops", "reset_plugin_rules"]


@attrs.define
class OpInfo:
    """What the core knows about an intrinsic."""

    name: str
    num_inputs: int  # -1 for variadic
    numpy_impl: Callable[..., Any] | None = None
    doc: str = ""
    #: True when the call only reads its arguments (safe to drop or hoist).
    pure: bool = True
    lowering: dict[str, Callable[[Any], Any]] = attrs.Factory(dict)


_OPS: dict[str, OpInfo] = {}
_INSTANCES: dict[str, Op] = {}


@register_object("Op")
class Op(Node):
    """A registered intrinsic.  There is one ``Op`` object per name."""

    name: str = value(str)

    @staticmethod
    def get(name: str) -> Op:
        """The op registered under ``name`` (``tir.`` may be omitted)."""
        key = name if name in _OPS else f"tir.{name}"
        if key not in _OPS:
            raise LoomValueError(f"unknown intrinsic op {name!r}; registered: {', '.join(sorted(_OPS))}")
        inst = _INSTANCES.get(key)
        if inst is None:
            inst = _INSTANCES[key] = Op(key)
        return inst

    @property
    def info(self) -> OpInfo:
        return _OPS[self.name]

    @classmethod
    def __from_json_fields__(cls, name: str) -> Op:
        return cls.get(name)  # one Op object per name, also after loading

    def __reduce__(self) -> tuple[Any, ...]:
        return (Op.get, (self.name,))  # the registered singleton in the loading process too

    def __attrs_post_init__(self) -> None:
        if self.name not in _OPS:
            raise LoomValueError(f"unknown intrinsic op {self.name!r}")


def register_op(name: str, num_inputs: int, numpy_impl: Callable[..., Any] | None = None,
                doc: str = "", pure: bool = True) -> Op:
    """Register an intrinsic op.  Registering the same name twice is an error."""
    if name in _OPS:
        raise LoomError(f"intrinsic op {name!r} is already registered")
    _OPS[name] = OpInfo(name, num_inputs, numpy_impl, doc, pure)
    return Op.get(name)


def register_lowering(op_name: str, target_kind: str, rule: Callable[[Any], Any], override: bool = False) -> None:
    """Give ``op_name`` a lowering rule for every target of kind ``target_kind``.

    ``rule(call) -> PrimExpr`` returns the replacement of the call, typically a
    ``Call`` of an extern function or of a backend intrinsic (None: leave the call).
    """
    info = Op.get(op_name).info
    if target_kind in info.lowering and not override:
        raise LoomError(f"op {info.name!r} already has a lowering rule for target kind {target_kind!r}")
    info.lowering[target_kind] = rule


def register_intrin_rule(target: Any, intrin: str, f: Callable[[Any], Any] | None = None,
                         override: bool = False) -> Any:
    """TVM's classic ``register_intrin_rule``: give the intrinsic ``intrin`` a lowering rule for ``target``.

    ``target`` is a target kind (``"cuda"``, ``"llvm"``, ``"c"``, ``"interp"``...), ``"default"`` for every
    kind without a rule of its own, or a Target.  ``intrin`` is ``"exp"`` or ``"tir.exp"`` (or a TVM 0.6
    name :func:`loom.call_intrin` takes, such as ``"pow"``); a name no op has
    yet becomes a new pure intrinsic that ``loom.call_pure_intrin(dtype, intrin, ...)`` then calls (TVM
    0.6's way of adding one; give it a numpy implementation with :func:`register_op` instead when the
    interpreter should run it).  ``f(call)`` returns the call's replacement, or the call itself (or
    None) to leave it.  Without ``f`` this is a decorator.  It is :func:`register_lowering` under TVM's
    argument order.

    >>> import loom
    >>> @loom.register_intrin_rule("c", "doc_log")
    ... def doc_log(call):
    ...     return loom.call_pure_extern(call.dtype, "logf", *call.args)
    >>> loom.call_pure_intrin("float32", "doc_log", loom.var("x", "float32")).op.name
    'tir.doc_log'
    """
    from ..target import Target, list_kinds
    from .intrin import CLASSIC_INTRINSIC_NAMES

    intrin = CLASSIC_INTRINSIC_NAMES.get(intrin, intrin)  # tvm_if_then_else, pow: the ops call_intrin builds
    kind = target.kind_name if isinstance(target, Target) else target
    if not isinstance(kind, str) or kind not in (*list_kinds(), "default"):
        raise LoomValueError(f"register_intrin_rule: unknown target kind {target!r}; installed: "
                             f"{', '.join(list_kinds())} (or 'default')")
    name = intrin if intrin in _OPS or "." in intrin else f"tir.{intrin}"
    if name not in _OPS:
        register_op(name, -1, doc=f"an intrinsic added by register_intrin_rule({kind!r}, {intrin!r})")

    def register(rule: Callable[[Any], Any]) -> Callable[[Any], Any]:
        register_lowering(name, kind, rule, override)
        return rule

    return register(f) if f is not None else register


def lowering_rule(op: Op | str, target: Target | str) -> Callable[[Any], Any] | None:
    """The lowering rule of ``op`` for ``target`` (a Target or a kind name), or None.

    Rules registered directly for the target's kind win over rules that plugins
    contribute through the ``loom_intrinsic_rules`` hook (which receives the
    Target, so a rule may depend on its attributes); rules registered for the
    kind ``default`` come last.  A kind name is asked of the plugins as
    ``Target(kind)`` when that kind is registered.
    """
    info = (Op.get(op) if isinstance(op, str) else op).info
    kind = target if isinstance(target, str) else target.kind_name
    rule = info.lowering.get(kind) or _plugin_rules(target).get(info.name)
    return rule if rule is not None else info.lowering.get("default")


_PLUGIN_RULES: dict[str, dict[str, Callable[[Any], Any]]] = {}
_PLUGIN_OWNERS: dict[str, dict[str, str]] = {}  # str(Target) -> {op name: plugin that gave its rule}


def _as_target(target: Target | str) -> Target | None:
    """``target`` as a Target; None for a kind name no plugin registered (no plugin can serve it)."""
    from ..target import Target, find_kind

    if not isinstance(target, str):
        return target
    return Target(target) if find_kind(target) is not None else None


def _plugin_rules(target: Target | str) -> dict[str, Callable[[Any], Any]]:
    """Rules contributed by plugins for one target, asked once per canonical target string and cached."""
    key = target if isinstance(target, str) else str(target)
    found = _PLUGIN_RULES.get(key)
    if found is not None:
        return found
    resolved = _as_target(target)
    if resolved is None:
        return {}  # not cached: the kind may be registered later
    found = _PLUGIN_RULES[key] = _ask_plugins(resolved)
    return found


def _ask_plugins(target: Target) -> dict[str, Callable[[Any], Any]]:
    from ..errors import PluginError
    from ..plugins import get_plugin_manager

    found: dict[str, Callable[[Any], Any]] = {}
    owner: dict[str, str] = {}
    for impl in get_plugin_manager().hook.loom_intrinsic_rules.get_hookimpls():
        try:
            rules = impl.function(target=target) or {}
        except LoomError:
            raise
        except Exception as err:  # noqa: BLE001 - a plugin's bug, named
            raise PluginError(f"plugin {impl.plugin_name!r} raised in loom_intrinsic_rules({target}): "
                              f"{type(err).__name__}: {err}") from err
        if not isinstance(rules, dict):
            raise PluginError(f"plugin {impl.plugin_name!r}: loom_intrinsic_rules must return a dict, "
                              f"got {type(rules).__name__}")
        for name, rule in rules.items():
            key = Op.get(name).name
            if key in found:
                raise PluginError(f"plugins {owner[key]!r} and {impl.plugin_name!r} both give a rule for {key} "
                                  f"when compiling for {target}")
            found[key], owner[key] = rule, impl.plugin_name
    _PLUGIN_OWNERS[str(target)] = owner
    return found


def rule_plugin(op: Op | str, target: Target | str) -> str | None:
    """The plugin whose ``loom_intrinsic_rules`` gave :func:`lowering_rule`'s answer for ``op`` and ``target``.

    None when the rule was registered directly (or there is none); errors of a
    plugin's rule name the plugin with it.
    """
    info = (Op.get(op) if isinstance(op, str) else op).info
    resolved = _as_target(target)
    if resolved is None or resolved.kind_name in info.lowering:
        return None
    return _PLUGIN_OWNERS.get(str(resolved), {}).get(info.name)


def reset_plugin_rules() -> None:
    """Forget cached plugin rules (after plugins are registered or removed)."""
    _PLUGIN_RULES.clear()
    _PLUGIN_OWNERS.clear()


def list_ops() -> list[str]:
    """Names of every registered intrinsic op."""
    return sorted(_OPS)
