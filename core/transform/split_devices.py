"""``SplitDevices``: a function per stage of a heterogeneous program, and the copies between devices.

A schedule whose stages run on different devices lowers, as any other, to one
PrimFunc; each top-level stage's statement is wrapped in
``AttrStmt(virtual_device, "loom.device_scope", whole)`` (``whole`` is 1 when the
stage writes all of its outputs, as a compute stage does).  This pass, run after
MakeAPI, makes the host's function out of it:

* every device region becomes a PrimFunc ``<name>_<output>`` whose target is the
  region's (its parameters: the pointers it uses, then the scalars), called from
  the host function with ``Call(int32, GlobalVar(...), args)``; the build then
  treats it as any function of its target (SplitHostDevice makes a device
  region's kernels);
* every buffer has a *home*: an argument lives where ``attrs[PARAM_DEVICES_ATTR]``
  says (the host unless placed), an intermediate tensor on the device of the
  stage that first writes it.  A region on another device gets a buffer of its
  own there (allocated alongside the home buffer, so freed with it), and a copy
  (a call of :data:`~loom.runtime.abi.DEVICE_COPY_FUNCTION`) is inserted where the
  region needs data that is not valid on its device: the plan keeps, per buffer,
  the devices holding its current value, so a tensor that stays on its device
  is never copied, and a value copied once is not copied again;
* an argument written on another device is copied back at the end;
* the host function records every argument's device type (``ARG_DEVICES_ATTR``)
  for the runtime's checks, and the plan in words (``attrs[PLAN_ATTR]``), which
  ``print(loom.lower(...))`` shows.

Regions must be top-level statements (not inside a loop or a condition): a
schedule's root stages are.
"""

from __future__ import annotations

from typing import Any

from ..arith import Analyzer
from ..errors import LoomError
from ..ir import expr as E
from ..ir import stmt as S
from ..ir.expr_ops import const
from ..ir.stmt import seq
from ..ir.function import GlobalVar, IRModule, PrimFunc
from ..ir.functor import Mutator, Visitor, post_order_visit
from ..runtime.abi import (ARG_DEVICES_ATTR, DEVICE_COPY_FUNCTION, DEVICE_ID_ANNOTATION, DEVICE_TYPE_ANNOTATION)
from ..target.devices import device_type_name
from ._util2 import extent_product, free_vars
from .affine_region import as_int64
from .pass_base import Pass, PassContext, module_pass

__all__ = ["SplitDevices", "DEVICE_SCOPE", "PARAM_DEVICES_ATTR", "REGION_ATTR", "PLAN_ATTR", "describe_device",
           "has_device_regions"]

#: ``AttrStmt`` key around a top-level stage: node the stage's VirtualDevice, value 1 when it writes all it writes.
DEVICE_SCOPE = "loom.device_scope"
#: ``PrimFunc.attrs`` key (before this pass): per parameter, the VirtualDevice of its memory (None: the host).
PARAM_DEVICES_ATTR = "loom.param_devices"
#: ``PrimFunc.attrs`` key of a function made from a region: the name of the function it came from.
REGION_ATTR = "loom.region_of"
#: ``PrimFunc.attrs`` key of the host function: the plan, one line per function and per copy.
PLAN_ATTR = "loom.device_plan"

_CPU = (1, 0)
Device = tuple[int, int]


def describe_device(vd: Any) -> str:
    """``ext_dev(0) [ext_dev]``: a VirtualDevice's device and the target compiling for it."""
    if vd.device_type is None:
        where = "an unconstrained device"
    else:
        where = f"{device_type_name(vd.device_type)}({vd.virtual_device_id or 0})"
    return f"{where} [{vd.target.without_host()}]" if vd.target is not None else where


def _device_of(vd: Any) -> Device:
    return (int(vd.device_type), int(vd.virtual_device_id or 0)) if vd is not None else _CPU


def _name(dev: Device) -> str:
    return f"{device_type_name(dev[0])}({dev[1]})"


def has_device_regions(func: PrimFunc) -> bool:
    found = [False]

    def visit(n: Any) -> None:
        if isinstance(n, S.AttrStmt) and n.attr_key == DEVICE_SCOPE:
            found[0] = True

    post_order_visit(func.body, visit)
    return found[0]


class _Region:
    """One device region: its device, and the pointers it reads, writes, or passes on."""

    def __init__(self, stmt: S.AttrStmt) -> None:
        self.stmt = stmt
        self.vd = stmt.node
        self.device = _device_of(stmt.node)
        self.whole = bool(getattr(stmt.value, "value", 0))
        local: set[int] = set()
        reads: dict[int, E.Var] = {}
        writes: dict[int, E.Var] = {}
        escapes: dict[int, E.Var] = {}

        def handles_in(node: Any) -> None:
            def grab(n: Any) -> None:
                if isinstance(n, E.Var) and n.dtype.is_handle:
                    escapes.setdefault(id(n), n)
                elif isinstance(n, E.BufferLoad):
                    escapes.setdefault(id(n.buffer.data), n.buffer.data)
            post_order_visit(node, grab)

        def visit(n: Any) -> None:
            if isinstance(n, S.Allocate):
                local.add(id(n.buffer_var))
            elif isinstance(n, E.BufferLoad):
                reads.setdefault(id(n.buffer.data), n.buffer.data)
            elif isinstance(n, S.BufferStore):
                writes.setdefault(id(n.buffer.data), n.buffer.data)
            elif isinstance(n, E.Call):
                # A pointer handed to a call (an extern function, address_of) may be read and written.
                for a in n.args:
                    handles_in(a)
            elif isinstance(n, S.LetStmt) and n.var.dtype.is_handle:
                handles_in(n.value)

        post_order_visit(stmt.body, visit)
        self.params = [v for v in free_vars(stmt.body) if id(v) not in local]
        free = {id(v) for v in self.params}
        self.reads = [v for k, v in reads.items() if k in free]
        self.writes = [v for k, v in {**writes, **escapes}.items() if k in free]
        self.escapes = [v for k, v in escapes.items() if k in free]

    def inputs(self) -> list[E.Var]:
        """The pointers whose current value the region needs: all it reads, less what it computes whole."""
        produced = {id(v) for v in self.writes} if self.whole else set()
        out = {id(v): v for v in self.reads if id(v) not in produced}
        out.update({id(v): v for v in self.escapes})
        if not self.whole:
            out.update({id(v): v for v in self.writes})
        return list(out.values())


class _Collect(Visitor):
    """Finds the regions in execution order and the host function's own allocations."""

    def __init__(self, fname: str) -> None:
        self.fname = fname
        self.regions: list[_Region] = []
        self.allocations: dict[int, S.Allocate] = {}
        self.depth = 0  # loops and conditions around the current statement

    def visit_AttrStmt(self, s: S.AttrStmt) -> None:
        if s.attr_key != DEVICE_SCOPE:
            return self.generic_visit(s)
        if self.depth:
            raise LoomError(f"{self.fname}: a device region ({describe_device(s.node)}) is inside a loop or a "
                            "condition; only top-level stages can run on a device of their own")
        self.regions.append(_Region(s))
        return None

    def visit_Allocate(self, s: S.Allocate) -> None:
        self.allocations[id(s.buffer_var)] = s
        self.generic_visit(s)

    def _nested(self, s: Any) -> None:
        self.depth += 1
        self.generic_visit(s)
        self.depth -= 1

    visit_For = visit_IfThenElse = visit_While = _nested


def _bytes(dtype: Any) -> int:
    return max(1, (dtype.bits + 7) // 8) * dtype.lanes


class _Splitter:
    def __init__(self, name: str, func: PrimFunc) -> None:
        self.name, self.func = name, func
        found = _Collect(name)
        found.visit(func.body)
        self.regions, self.allocations = found.regions, found.allocations
        vds = func.attrs.get(PARAM_DEVICES_ATTR) or (None,) * len(func.params)
        self.home: dict[int, Device] = {id(p): _device_of(vd) for p, vd in zip(func.params, vds)}
        self.params = {id(p): p for p in func.params}
        for r in self.regions:  # an intermediate lives where it is first written
            for v in r.writes:
                if id(v) in self.allocations:
                    self.home.setdefault(id(v), r.device)
        for k in self.allocations:
            self.home.setdefault(k, _CPU)
        self.valid: dict[int, list[Device]] = {k: [d] for k, d in self.home.items() if k in self.params}
        self.replicas: dict[tuple[int, Device], E.Var] = {}
        self.before: dict[int, list[S.Stmt]] = {}
        self.calls: dict[int, S.Stmt] = {}
        self.kernels: dict[str, PrimFunc] = {}
        self.plan: list[str] = []
        self.analyzer = Analyzer()

    # -- where a pointer's value is ---------------------------------------------
    def storage(self, v: E.Var, dev: Device) -> E.Var:
        if self.home.get(id(v), _CPU) == dev:
            return v
        if id(v) not in self.home:
            raise LoomError(f"{self.name}: the stage on {_name(dev)} uses the pointer {v.name}, which is neither an "
                            "argument nor a buffer of the function; it cannot be copied between devices")
        key = (id(v), dev)
        if key not in self.replicas:
            self.replicas[key] = E.Var(f"{v.name}.{device_type_name(dev[0])}{dev[1] or ''}", v.dtype)
        return self.replicas[key]

    def extent(self, v: E.Var) -> tuple[E.PrimExpr, E.PrimExpr, Any]:
        """``(elements, element offset, dtype)`` of pointer ``v``'s buffer: what a copy moves, from where."""
        alloc = self.allocations.get(id(v))
        if alloc is not None:
            return extent_product(alloc.extents), const(0, "int64"), alloc.dtype
        buf = self.func.buffer_map.get(v)
        if buf is None:
            raise LoomError(f"{self.name}: argument {v.name} is a pointer without a buffer; only buffer arguments "
                            "can be copied between devices")
        if buf.strides:
            raise LoomError(f"{self.name}: argument {buf.name} has explicit strides; an argument that is copied "
                            "between devices must be a compact buffer")
        return extent_product(buf.shape), as_int64(buf.elem_offset), buf.dtype

    def copy(self, v: E.Var, src: Device, dst: Device) -> S.Stmt:
        count, offset, dtype = self.extent(v)
        self.plan.append(f"copy {v.name}: {_name(src)} -> {_name(dst)}")
        args = [self.storage(v, dst), self.storage(v, src), self.analyzer.simplify(offset * _bytes(dtype)),
                self.analyzer.simplify(count * _bytes(dtype)), *(const(x, "int32") for x in (*dst, *src))]
        return S.Evaluate(E.Call("int32", GlobalVar(DEVICE_COPY_FUNCTION), args))

    def need(self, v: E.Var, dev: Device) -> list[S.Stmt]:
        have = self.valid.get(id(v), [])
        if not have or dev in have:
            return []
        src = self.home[id(v)] if self.home.get(id(v)) in have else have[0]
        have.append(dev)
        return [self.copy(v, src, dev)]

    # -- the plan --------------------------------------------------------------------
    def run(self) -> tuple[PrimFunc, dict[str, PrimFunc]]:
        used: set[str] = set()
        for k, r in enumerate(self.regions):
            out = r.writes[0].name if r.writes else f"stage{k}"
            fname = f"{self.name}_{out}"
            while fname in used:
                fname = f"{fname}_"
            used.add(fname)
            copies = [c for v in r.inputs() for c in self.need(v, r.device)]
            for v in r.writes:
                self.valid[id(v)] = [r.device]
            self.before[id(r.stmt)] = copies
            self.calls[id(r.stmt)] = self.outline(fname, r)
        final = []
        for p in self.func.params:
            have = self.valid.get(id(p))
            if have and self.home[id(p)] not in have:
                final.append(self.copy(p, have[0], self.home[id(p)]))
        body = _Rewrite(self).visit(self.func.body)
        if final:
            body = seq(body, *final)
        for p in reversed(self.func.params):
            body = self.wrap_replicas(p, body, None)
        devices = tuple(self.home[id(p)][0] if p.dtype.is_handle else 1 for p in self.func.params)
        attrs = {k: v for k, v in self.func.attrs.items() if k != PARAM_DEVICES_ATTR}
        attrs.update({ARG_DEVICES_ATTR: devices, PLAN_ATTR: tuple(self.plan)})
        return self.func.with_(body=body, attrs=attrs), self.kernels

    def outline(self, fname: str, r: _Region) -> S.Stmt:
        handles = [v for v in r.params if v.dtype.is_handle]
        scalars = [v for v in r.params if not v.dtype.is_handle]
        attrs = {"target": r.vd.target, "global_symbol": fname, REGION_ATTR: self.name, "loom.virtual_device": r.vd}
        if "tir.noalias" in self.func.attrs:
            attrs["tir.noalias"] = self.func.attrs["tir.noalias"]
        self.kernels[fname] = PrimFunc([*handles, *scalars], r.stmt.body, attrs=attrs)
        self.plan.append(f"{fname}: {describe_device(r.vd)}")
        args = [self.storage(v, r.device) for v in handles] + scalars
        return S.Evaluate(E.Call("int32", GlobalVar(fname), args))

    def wrap_replicas(self, v: E.Var, body: S.Stmt, alloc: S.Allocate | None) -> S.Stmt:
        for (key, dev), replica in self.replicas.items():
            if key != id(v):
                continue
            if alloc is not None:
                dtype, extents = alloc.dtype, list(alloc.extents)
            else:  # room for the argument's elements after its element offset
                count, offset, dtype = self.extent(v)
                extents = [self.analyzer.simplify(offset + count)]
            notes = {} if dev == _CPU else {DEVICE_TYPE_ANNOTATION: dev[0], DEVICE_ID_ANNOTATION: dev[1]}
            body = S.Allocate(replica, dtype, extents, const(True, "bool"), body, annotations=notes)
        return body


class _Rewrite(Mutator):
    def __init__(self, plan: _Splitter) -> None:
        self.plan = plan

    def visit_AttrStmt(self, s: S.AttrStmt) -> S.Stmt:
        if s.attr_key != DEVICE_SCOPE:
            return self.generic_visit(s)
        copies = self.plan.before[id(s)]
        call = self.plan.calls[id(s)]
        return seq(*copies, call) if copies else call

    def visit_Allocate(self, s: S.Allocate) -> S.Stmt:
        out = self.generic_visit(s)
        home = self.plan.home.get(id(s.buffer_var), _CPU)
        if home != _CPU:
            out = out.with_(annotations={**s.annotations, DEVICE_TYPE_ANNOTATION: home[0],
                                         DEVICE_ID_ANNOTATION: home[1]})
        return out.with_(body=self.plan.wrap_replicas(s.buffer_var, out.body, s))


def split_devices(func: PrimFunc, name: str) -> tuple[PrimFunc, dict[str, PrimFunc]]:
    """The host function and the functions of its device regions (``func`` unchanged when it has none)."""
    if not has_device_regions(func):
        return func, {}
    return _Splitter(str(func.attrs.get("global_symbol", name)), func).run()


def SplitDevices() -> Pass:  # noqa: N802 - classic factory name
    """The module pass: :func:`split_devices` on every PrimFunc, the region functions added to the module."""

    def run(mod: IRModule, ctx: PassContext) -> IRModule:
        funcs: dict[str, Any] = {}
        for name, f in mod.functions.items():
            if not isinstance(f, PrimFunc):
                funcs[name] = f
                continue
            host, regions = split_devices(f, name)
            funcs[name] = host
            for rname, r in regions.items():
                if rname in mod.functions or rname in funcs:
                    raise LoomError(f"SplitDevices: the function name {rname!r} is already taken in the module")
                funcs[rname] = r
        return mod.with_(functions=funcs)

    return module_pass(run, name="SplitDevices")
