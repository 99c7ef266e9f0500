"""Expressions to LLVM IR: the arithmetic, casts, vectors and buffer access of one function.

Semantics follow the reference interpreter exactly: integer arithmetic wraps at
its width; ``Div``/``Mod`` truncate (``sdiv``/``srem``, unsigned ``udiv``/``urem``);
``FloorDiv``/``FloorMod`` round toward negative infinity; ``INT_MIN / -1`` wraps;
an integer divisor that is not a non-zero constant is checked first, and zero makes
the function fail with :func:`loom.runtime.abi.division_by_zero_message` (which the
runtime raises as :class:`loom.testing.DivisionByZero`); float ``Mod`` is
``fmod`` (``frem``), float ``FloorMod`` is ``a - floor(a / b) * b``; ``Min``/``Max``
are ``a < b ? a : b`` / ``a > b ? a : b``.  Vectors are LLVM vectors.

Buffer elements are addressed as :meth:`loom.ir.Buffer.offset_of` says, in 64-bit
arithmetic.  A load or store whose lanes are consecutive (a stride-1 ``Ramp`` index)
is one vector access, aligned to what the offset provably allows; other vector
indices become per-lane gathers and scatters.
"""

from __future__ import annotations

import math
from typing import Any, Callable, Sequence

from llvmlite import ir

from loom.arith import Analyzer
from loom.codegen.flat_offset import OffsetTerm, offset_terms
from loom.errors import LoomError, LoomTypeError
from loom.ir import expr as E
from loom.ir import expr_ops as ops
from loom.ir.buffer import Buffer
from loom.ir.dtype import DataType
from loom.ir.function import GlobalVar
from loom.runtime.abi import division_by_zero_message

from . import bfloat16
from .codegen_vector import VectorEmitter
from .intrinsics import emit_call

__all__ = ["ExprEmitter", "llvm_type"]

I1, I8, I64 = ir.IntType(1), ir.IntType(8), ir.IntType(64)
PTR = I8.as_pointer()


def llvm_type(t: DataType, memory: bool = False) -> ir.Type:
    """The LLVM type of ``t``; ``memory=True`` gives bools their byte and bfloat16 its 16 bits in memory."""
    if t.is_handle:
        return PTR
    if t.code == "bfloat":  # computed in float32 (see .bfloat16)
        scalar: ir.Type = ir.IntType(16) if memory else ir.FloatType()
    elif t.is_bool:
        scalar = I8 if memory else I1
    elif t.is_integer:
        scalar = ir.IntType(t.bits)
    elif t.is_float:
        scalar = {16: ir.HalfType(), 32: ir.FloatType(), 64: ir.DoubleType()}[t.bits]
    else:
        raise LoomTypeError(f"the llvm backend does not compile {t} values yet (supported: int, uint, float, bool)")
    return ir.VectorType(scalar, t.lanes) if t.lanes > 1 else scalar


def _signed_value(t: DataType, v: int) -> int:
    bits = t.bits
    v &= (1 << bits) - 1
    return v - (1 << bits) if t.is_integer and v >> (bits - 1) and bits > 1 else v


_ICMP = {E.EQ: "==", E.NE: "!=", E.LT: "<", E.LE: "<=", E.GT: ">", E.GE: ">="}


def _mangle(t: ir.Type) -> str:
    """LLVM's overload suffix: ``f32``, ``i64``, ``v8f32``..."""
    if isinstance(t, ir.VectorType):
        return f"v{t.count}{_mangle(t.element)}"
    if isinstance(t, ir.IntType):
        return f"i{t.width}"
    names = {ir.FloatType: "f32", ir.DoubleType: "f64", ir.HalfType: "f16"}
    for cls, suffix in names.items():
        if isinstance(t, cls):
            return suffix
    raise LoomError(f"no LLVM intrinsic overload for type {t}")


def _nonzero_constant(e: E.PrimExpr, value: ir.Value) -> bool:
    """Whether the divisor ``e`` (emitted as ``value``, which LLVM may have folded) is a constant
    without a zero lane: no check needed."""
    if ops.is_nonzero_constant(e):
        return True
    constant = getattr(value, "constant", None) if isinstance(value, ir.Constant) else None
    return isinstance(constant, int) and constant != 0


class ExprEmitter(VectorEmitter):
    """Emits expressions into ``self.builder``; ``self.values`` maps ``id(Var)`` to its LLVM value.

    Vector building blocks and ``Shuffle`` come from :class:`.codegen_vector.VectorEmitter`.
    """

    module: ir.Module
    builder: ir.IRBuilder
    values: dict[int, ir.Value]
    #: The function's name (in messages) and its LLVM symbol (what outlined functions are named after).
    fname: str
    symbol: str

    def __init__(self) -> None:
        self.analyzer = Analyzer()
        self._strings: dict[str, ir.Value] = {}
        #: Fast-math flags of float arithmetic (``("contract",)`` when the target allows FMA fusion).
        self.float_flags: tuple[str, ...] = ()
        #: The alignment of argument buffers' data, by ``id`` of the data Var (others: ``data_alignment``).
        self.param_alignments: dict[int, int] = {}
        #: The target's rules for intrinsics LowerIntrin left (:mod:`.intrinsic_rules`).
        self.intrinsic_rules: dict[str, Callable[[E.Call], E.PrimExpr | None]] = {}
        #: How this module calls the functions it calls (:class:`.calls.ModuleCalls`).
        self.calls: Any = None

    #: Provided by the statement emitter: store an ``i8*`` message where the caller reads errors,
    #: and free the live allocations and return a status.
    set_error: Callable[[ir.Value], None]
    return_code: Callable[[int], None]

    #: What every emitter of one PrimFunc shares (the function's own and its outlined regions').
    FUNCTION_STATE = ("module", "fname", "symbol", "analyzer", "_strings", "float_flags", "param_alignments",
                      "intrinsic_rules", "calls")

    def share_function_state(self, parent: ExprEmitter) -> None:
        """Use ``parent``'s module, names, analyzer, string constants, float flags and pointer facts."""
        for name in self.FUNCTION_STATE:
            setattr(self, name, getattr(parent, name))

    def alignment_of(self, buf: Buffer) -> int:
        """The alignment ``buf``'s data pointer is known to have."""
        return self.param_alignments.get(id(buf.data), buf.data_alignment)

    # -- helpers -------------------------------------------------------------
    def llvm_type(self, t: DataType) -> ir.Type:
        return llvm_type(t)

    def intrinsic(self, name: str, types: Sequence[ir.Type], ret: ir.Type | None = None) -> ir.Function:
        """The overloaded LLVM intrinsic ``name`` on operands of ``types``, e.g. ``llvm.exp.v8f32``.

        The overload suffix comes from ``types[0]`` (scalar or vector); the result
        type is ``ret``, by default the first operand's.  llvmlite's
        ``declare_intrinsic`` cannot mangle vector types, hence this.
        """
        full = f"{name}.{_mangle(types[0])}"
        fnty = ir.FunctionType(ret if ret is not None else types[0], list(types))
        found = self.module.globals.get(full)
        if found is None:
            return ir.Function(self.module, fnty, name=full)
        if not isinstance(found, ir.Function) or found.function_type != fnty:
            raise LoomError(f"{self.fname}: LLVM intrinsic {full} is used with two signatures "
                            f"({found.type} and {fnty})")
        return found

    def extern(self, name: str, ret: ir.Type, args: Sequence[ir.Type]) -> ir.Function:
        """The declaration of C function ``name``; one signature per name."""
        found = self.module.globals.get(name)
        fnty = ir.FunctionType(ret, list(args))
        if found is None:
            return ir.Function(self.module, fnty, name=name)
        if not isinstance(found, ir.Function) or found.function_type != fnty:
            raise LoomError(f"{self.fname}: external function {name} is used with two signatures "
                            f"({found.type} and {fnty})")
        return found

    def string(self, text: str) -> ir.Value:
        """A pointer to a private NUL-terminated constant holding ``text``."""
        found = self._strings.get(text)
        if found is None:
            data = bytearray(text.encode()) + b"\0"
            ty = ir.ArrayType(I8, len(data))
            g = ir.GlobalVariable(self.module, ty, name=self.module.get_unique_name(".str"))
            g.global_constant, g.linkage, g.unnamed_addr = True, "private", True
            g.initializer = ir.Constant(ty, data)
            found = self._strings[text] = g.bitcast(PTR)
        return found

    def splat_const(self, t: DataType, v: Any) -> ir.Constant:
        ty = llvm_type(t)
        if isinstance(ty, ir.VectorType):
            return ir.Constant(ty, [ir.Constant(ty.element, v)] * ty.count)
        return ir.Constant(ty, v)

    def convert(self, v: ir.Value, src: DataType, dst: DataType) -> ir.Value:
        """Cast ``v`` from ``src`` to ``dst`` (same lanes, or a scalar broadcast)."""
        b = self.builder
        if src.lanes == 1 and dst.lanes > 1:
            v = self.broadcast(v, dst.lanes)
            src = src.with_lanes(dst.lanes)
        # bfloat16 values live in float32 registers; the caller rounds a cast to bfloat16.
        src, dst = (DataType("float", 32, x.lanes) if x.code == "bfloat" else x for x in (src, dst))
        to = llvm_type(dst)
        if src.code == dst.code and src.bits == dst.bits:
            return v
        if dst.is_bool:
            zero = ir.Constant(v.type, None)
            return b.fcmp_unordered("!=", v, zero) if src.is_float else b.icmp_unsigned("!=", v, zero)
        if src.is_float and dst.is_float:
            return b.fpext(v, to) if dst.bits > src.bits else b.fptrunc(v, to)
        if src.is_float:
            return b.fptosi(v, to) if dst.is_int else b.fptoui(v, to)
        if dst.is_float:
            return b.sitofp(v, to) if src.is_int else b.uitofp(v, to)
        if dst.is_handle or src.is_handle:
            return b.inttoptr(v, to) if dst.is_handle else b.ptrtoint(v, to)
        if dst.bits < src.bits:
            return b.trunc(v, to)
        if dst.bits > src.bits:
            return b.sext(v, to) if src.is_int else b.zext(v, to)
        return v  # int <-> uint of one width: the same bits

    # -- dispatch ------------------------------------------------------------
    def expr(self, e: E.PrimExpr) -> ir.Value:
        value = self.expr_unrounded(e)
        if e.dtype.code == "bfloat" and isinstance(e, (E.BinaryOp, E.Cast, E.Call)):
            value = bfloat16.round_to_bfloat16(self.builder, value)  # each operation rounds, as numpy's
        return value

    def expr_unrounded(self, e: E.PrimExpr) -> ir.Value:
        """The value of ``e`` with a bfloat16 result not yet rounded (operands are)."""
        rule = getattr(self, f"_e_{type(e).__name__}", None)
        if rule is not None:
            return rule(e)
        if not isinstance(e, E.BinaryOp):
            raise LoomError(f"{self.fname}: the llvm backend cannot compile {type(e).__name__} expressions ({e})")
        return self._binary(e)

    def _e_Var(self, e: E.Var) -> ir.Value:
        found = self.values.get(id(e))
        if found is None:
            raise LoomError(f"{self.fname}: variable {e.name} is used where it is not defined")
        return found

    _e_SizeVar = _e_Var

    def _e_IntImm(self, e: E.IntImm) -> ir.Value:
        return ir.Constant(llvm_type(e.dtype), _signed_value(e.dtype, e.value) if not e.dtype.is_bool else e.value)

    def _e_FloatImm(self, e: E.FloatImm) -> ir.Value:
        value = bfloat16.constant(e.value) if e.dtype.code == "bfloat" else e.value
        return ir.Constant(llvm_type(e.dtype), value)

    def _e_StringImm(self, e: E.StringImm) -> ir.Value:
        return self.string(e.value)

    def _e_Cast(self, e: E.Cast) -> ir.Value:
        return self.convert(self.expr(e.value), e.value.dtype, e.dtype)

    def _e_Not(self, e: E.Not) -> ir.Value:
        return self.builder.not_(self.expr(e.a))

    def _e_Select(self, e: E.Select) -> ir.Value:
        # Both sides are evaluated (the IR's semantics); a scalar condition picks whole vectors.
        return self.builder.select(self.expr(e.condition), self.expr(e.true_value), self.expr(e.false_value))

    def _e_Ramp(self, e: E.Ramp) -> ir.Value:
        t = e.dtype
        base, stride = self.broadcast(self.expr(e.base), e.lanes), self.broadcast(self.expr(e.stride), e.lanes)
        lanes = ir.Constant(llvm_type(t), list(range(e.lanes)))
        return self.builder.add(base, self.builder.mul(stride, lanes))

    def _e_Broadcast(self, e: E.Broadcast) -> ir.Value:
        return self.broadcast(self.expr(e.value), e.lanes)

    def _e_Let(self, e: E.Let) -> ir.Value:
        v = self.expr(e.value)
        self.name(v, e.var)
        self.values[id(e.var)] = v
        try:
            return self.expr(e.body)
        finally:
            del self.values[id(e.var)]

    def _e_Call(self, e: E.Call) -> ir.Value:
        if isinstance(e.op, GlobalVar):
            return self.calls.emit(self, e)
        return emit_call(self, e)

    def _e_BufferLoad(self, e: E.BufferLoad) -> ir.Value:
        return self.load(e.buffer, e.indices, e.dtype)

    @staticmethod
    def name(v: ir.Value, var: E.Var) -> None:
        if isinstance(v, ir.Instruction) and not v.name:
            v.name = var.name

    # -- binary operators ----------------------------------------------------
    def _binary(self, e: E.BinaryOp) -> ir.Value:
        t = e.a.dtype
        a, b = self.expr(e.a), self.expr(e.b)
        bld = self.builder
        cls = type(e)
        if t.is_handle:
            raise LoomTypeError(f"{self.fname}: cannot compute {cls.__name__} of handles in {e}")
        if cls in _ICMP:
            op = _ICMP[cls]
            if t.is_float:
                return bld.fcmp_unordered(op, a, b) if cls is E.NE else bld.fcmp_ordered(op, a, b)
            return bld.icmp_signed(op, a, b) if t.is_int else bld.icmp_unsigned(op, a, b)
        if cls is E.And:
            return bld.and_(a, b)
        if cls is E.Or:
            return bld.or_(a, b)
        if cls in (E.Min, E.Max):
            op = "<" if cls is E.Min else ">"
            if t.is_float:
                c = bld.fcmp_ordered(op, a, b)
            else:
                c = bld.icmp_signed(op, a, b) if t.is_int else bld.icmp_unsigned(op, a, b)
            return bld.select(c, a, b)
        if t.is_float:
            return self._float_binary(cls, a, b, e)
        if t.is_bool:
            raise LoomTypeError(f"{self.fname}: {cls.__name__} of bools is not arithmetic; cast first ({e})")
        if cls in (E.Div, E.Mod, E.FloorDiv, E.FloorMod) and not _nonzero_constant(e.b, b):
            self._check_divisor(b, e)
        return self._int_binary(cls, a, b, t)

    def _check_divisor(self, b: ir.Value, e: E.PrimExpr) -> None:
        """Fail the function when ``b`` (any lane of it) is zero: LLVM's division by zero is undefined,
        and x86 traps on it."""
        bld = self.builder
        zero = bld.icmp_unsigned("==", b, ir.Constant(b.type, None))
        if isinstance(b.type, ir.VectorType):
            zero = bld.call(self.intrinsic("llvm.vector.reduce.or", [zero.type], I1), [zero])
        fail, ok = bld.append_basic_block("div.zero"), bld.append_basic_block("div.ok")
        bld.cbranch(zero, fail, ok).set_weights([1, 1 << 20])
        bld.position_at_end(fail)
        self.set_error(self.string(division_by_zero_message(str(e))))
        self.return_code(-1)
        bld.position_at_end(ok)

    def _float_binary(self, cls: type, a: ir.Value, b: ir.Value, e: E.PrimExpr) -> ir.Value:
        bld = self.builder
        simple = {E.Add: bld.fadd, E.Sub: bld.fsub, E.Mul: bld.fmul, E.Div: bld.fdiv, E.Mod: bld.frem}
        if cls in simple:
            # "contract" lets LLVM fuse a * b + c into one FMA (one rounding instead of two).
            return simple[cls](a, b, flags=self.float_flags)
        floor = bld.call(self.intrinsic("llvm.floor", [a.type]), [bld.fdiv(a, b)])
        if cls is E.FloorDiv:
            return floor
        if cls is E.FloorMod:
            return bld.fsub(a, bld.fmul(floor, b))
        raise LoomError(f"{self.fname}: unsupported float operator {cls.__name__} in {e}")

    def _int_binary(self, cls: type, a: ir.Value, b: ir.Value, t: DataType) -> ir.Value:
        bld = self.builder
        simple = {E.Add: bld.add, E.Sub: bld.sub, E.Mul: bld.mul}
        if cls in simple:
            return simple[cls](a, b)
        if t.is_uint:  # unsigned: truncating and floor division agree
            return bld.udiv(a, b) if cls in (E.Div, E.FloorDiv) else bld.urem(a, b)
        # sdiv/srem of INT_MIN by -1 overflow (x86 traps): divide by 1 instead and select the
        # wrapped negation, as the IR defines it.  LLVM folds this away for constant divisors.
        zero = ir.Constant(a.type, None)
        one = self.splat_const(t, 1)
        minus_one = bld.icmp_signed("==", b, self.splat_const(t, -1))
        safe = bld.select(minus_one, one, b)
        r = bld.srem(a, safe)  # a % -1 == a % 1 == 0
        if cls is E.Mod:
            return r
        if cls is E.Div:
            return bld.select(minus_one, bld.sub(zero, a), bld.sdiv(a, safe))
        # Floor rounding: adjust the truncated result when the remainder is non-zero
        # and its sign differs from the divisor's.
        fix = bld.and_(bld.icmp_signed("!=", r, zero),
                       bld.xor(bld.icmp_signed("<", r, zero), bld.icmp_signed("<", b, zero)))
        if cls is E.FloorDiv:
            q = bld.select(minus_one, bld.sub(zero, a), bld.sdiv(a, safe))
            return bld.select(fix, bld.sub(q, one), q)
        if cls is E.FloorMod:
            return bld.select(fix, bld.add(r, b), r)
        raise LoomError(f"{self.fname}: unsupported integer operator {cls.__name__}")

    # -- buffer access -------------------------------------------------------
    def buffer_pointer(self, buf: Buffer) -> ir.Value:
        found = self.values.get(id(buf.data))
        if found is None:
            raise LoomError(f"{self.fname}: buffer {buf.name} is used where its data {buf.data.name} is not defined")
        return found

    def _i64(self, e: E.PrimExpr) -> ir.Value:
        if isinstance(e, E.IntImm):
            return ir.Constant(I64, _signed_value(e.dtype, e.value))
        v = self.expr(e)
        return self.convert(v, e.dtype, DataType("int", 64, e.dtype.lanes))

    def _terms(self, buf: Buffer, indices: Sequence[E.PrimExpr]) -> list[OffsetTerm]:
        """The offset terms of ``buf[indices]``, after the zero test each merged division still owes."""
        terms = offset_terms(buf, indices) if buf.shape else []
        for t in terms:
            if t.zero_test is not None:
                divisor, division = t.zero_test
                self._check_divisor(self.expr(divisor), division)
        return terms

    def _scalar_offset(self, buf: Buffer, terms: Sequence[OffsetTerm]) -> ir.Value:
        acc = self._i64(buf.elem_offset)
        for t in terms:
            acc = self.builder.add(acc, self.builder.mul(self._i64(t.index), self._i64(t.stride)))
        return acc

    def _access(self, buf: Buffer, indices: Sequence[E.PrimExpr], lanes: int) -> tuple[str, Any, int]:
        """``("scalar", offset, align)``, ``("contiguous", offset, align)`` or ``("lanes", offsets, align)``."""
        if buf.dtype.lanes != 1 and lanes != buf.dtype.lanes:
            raise LoomError(f"{self.fname}: vector indices into {buf.name}, whose elements are {buf.dtype}, "
                            "are not supported by the llvm backend")
        elem_bytes = max(1, buf.dtype.bits // 8) * buf.dtype.lanes
        if not buf.shape:  # a 0-d buffer: the element at elem_offset
            indices = ()
        terms = self._terms(buf, indices)
        vec = [k for k, t in enumerate(terms) if t.index.dtype.lanes > 1]
        if not vec:
            return "scalar", self._scalar_offset(buf, terms), self._alignment(buf, terms, elem_bytes)
        k = vec[0]
        ramp = terms[k].index
        if len(vec) == 1 and isinstance(ramp, E.Ramp):
            step = self.analyzer.simplify(ramp.stride * terms[k].stride)
            if isinstance(step, E.IntImm) and step.value == 1:
                base = [*terms[:k], OffsetTerm(ramp.base, terms[k].stride), *terms[k + 1:]]
                return "contiguous", self._scalar_offset(buf, base), self._alignment(buf, base, elem_bytes)
        # Gather/scatter: one offset per lane.
        acc = self.broadcast(self._i64(buf.elem_offset), lanes)
        for t in terms:
            i = self._i64(t.index)
            if t.index.dtype.lanes == 1:
                i = self.broadcast(i, lanes)
            acc = self.builder.add(acc, self.builder.mul(i, self.broadcast(self._i64(t.stride), lanes)))
        return "lanes", acc, min(elem_bytes, self.alignment_of(buf))

    def _alignment(self, buf: Buffer, terms: Sequence[OffsetTerm], elem_bytes: int) -> int:
        """The largest power of two the byte offset of ``terms`` provably is a multiple of."""
        try:
            offset = buf.elem_offset
            for t in terms:
                offset = offset + t.index * t.stride
            coeff, base = self.analyzer.modular_set(offset)
        except LoomError:
            return elem_bytes
        g = math.gcd(coeff, base) * elem_bytes
        if g == 0:
            return self.alignment_of(buf)
        return max(1, min(self.alignment_of(buf), g & -g))

    def _element_pointer(self, buf: Buffer, offset: ir.Value, elem: ir.Type, access: ir.Type | None = None) -> ir.Value:
        """A pointer to element ``offset`` of ``buf``, typed for an ``access`` (default: one element)."""
        b = self.builder
        base = b.bitcast(self.buffer_pointer(buf), elem.as_pointer())
        ptr = b.gep(base, [offset], inbounds=True, source_etype=elem)
        return ptr if access is None or access == elem else b.bitcast(ptr, access.as_pointer())

    def load(self, buf: Buffer, indices: Sequence[E.PrimExpr], t: DataType) -> ir.Value:
        """The value of ``buf[indices]`` (``t`` says the lanes)."""
        b = self.builder
        mem_elem = llvm_type(buf.dtype.element_of(), memory=True)
        kind, offset, align = self._access(buf, indices, t.lanes)
        if kind == "lanes":
            def one(off: ir.Value) -> ir.Value:
                return b.load(self._element_pointer(buf, off, mem_elem), typ=mem_elem, align=align)
            raw = self.per_lane(offset, one)
        else:
            ty = ir.VectorType(mem_elem, t.lanes) if t.lanes > 1 else mem_elem
            if buf.dtype.lanes != 1:
                offset = b.mul(offset, ir.Constant(I64, buf.dtype.lanes))
            raw = b.load(self._element_pointer(buf, offset, mem_elem, ty), typ=ty, align=align)
        if t.is_bool:
            return b.icmp_unsigned("!=", raw, ir.Constant(raw.type, None))
        if buf.dtype.code == "bfloat":
            return bfloat16.widen(b, raw)
        return raw

    def store(self, buf: Buffer, indices: Sequence[E.PrimExpr], value: ir.Value, t: DataType) -> None:
        """``buf[indices] = value``."""
        b = self.builder
        mem_elem = llvm_type(buf.dtype.element_of(), memory=True)
        if t.is_bool:
            value = b.zext(value, ir.VectorType(I8, t.lanes) if t.lanes > 1 else I8)
        elif buf.dtype.code == "bfloat":
            value = bfloat16.to_bits(b, value)
        kind, offset, align = self._access(buf, indices, t.lanes)
        if kind == "lanes":
            for k in range(t.lanes):
                idx = ir.Constant(ir.IntType(32), k)
                ptr = self._element_pointer(buf, b.extract_element(offset, idx), mem_elem)
                b.store(b.extract_element(value, idx), ptr, align=align)
            return
        if buf.dtype.lanes != 1:
            offset = b.mul(offset, ir.Constant(I64, buf.dtype.lanes))
        b.store(value, self._element_pointer(buf, offset, mem_elem, value.type), align=align)
