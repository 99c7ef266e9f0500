"""The float16 conversions LLVM calls where the CPU has no instruction for them.

LLVM computes ``half`` arithmetic in float32 and converts between the two
with an instruction where the CPU has one (x86's F16C, AArch64).  Elsewhere,
and for double -> half on every x86 CPU before AVX512-FP16, it calls the
compiler runtime: ``__extendhfsf2``, ``__truncsfhf2`` and ``__truncdfhf2``.
A JIT links against this process only, where those are missing (libgcc has
them only from GCC 12, and Python need not load it), and a call of a missing
symbol jumps to address 0.  So every module that uses ``half`` defines the
three itself (``weak_odr``, so LLVM keeps them until instruction selection
asks for them, and hidden, so an exported library does not export them), as
TVM's runtime defines them.

They round as numpy (and so the interpreter) does: to nearest, ties to even,
with float16 subnormals; past the largest float16 to infinity; a NaN stays a
NaN of the same sign and top payload bits, made quiet as x86's ``vcvtps2ph``
makes it.  double -> half rounds once: the double is first rounded to float32
*to odd* (toward zero, the last bit set when inexact), which float32's 13
spare bits make exact for the second rounding.

>>> from llvmlite import ir
>>> m = ir.Module()
>>> define_conversions(m)
>>> sorted(f.name for f in m.functions)
['__extendhfsf2', '__truncdfhf2', '__truncsfhf2']
"""

from __future__ import annotations

from llvmlite import ir

__all__ = ["define_conversions", "uses_half", "LIBCALLS"]

I16, I32 = ir.IntType(16), ir.IntType(32)
HALF, FLOAT, DOUBLE = ir.HalfType(), ir.FloatType(), ir.DoubleType()

#: The conversions LLVM may call, with their types: (return, argument).
LIBCALLS = {"__extendhfsf2": (FLOAT, HALF), "__truncsfhf2": (HALF, FLOAT), "__truncdfhf2": (HALF, DOUBLE)}


def _c(value: int) -> ir.Constant:
    return ir.Constant(I32, value)


def _function(module: ir.Module, name: str) -> tuple[ir.Function, ir.IRBuilder]:
    ret, arg = LIBCALLS[name]
    fn = ir.Function(module, ir.FunctionType(ret, [arg]), name=name)
    fn.linkage = "weak_odr hidden"  # llvmlite prints no visibility of its own: it goes after the linkage
    fn.attributes.add("nounwind")
    return fn, ir.IRBuilder(fn.append_basic_block("entry"))


def _extend(module: ir.Module) -> None:
    """``float __extendhfsf2(half)``: exact (every float16 is a float32)."""
    fn, b = _function(module, "__extendhfsf2")
    bits = b.zext(b.bitcast(fn.args[0], I16), I32)
    sign = b.shl(b.and_(bits, _c(0x8000)), _c(16))
    exponent = b.and_(b.lshr(bits, _c(10)), _c(0x1F))
    mantissa = b.and_(bits, _c(0x3FF))
    normal = b.or_(b.shl(b.add(exponent, _c(112)), _c(23)), b.shl(mantissa, _c(13)))
    special = b.or_(_c(0x7F800000), b.shl(mantissa, _c(13)))  # infinities and NaNs
    # A subnormal (or zero) is mantissa * 2**-24, which float32 holds exactly.
    tiny = b.bitcast(b.fmul(b.uitofp(mantissa, FLOAT), ir.Constant(FLOAT, 2.0 ** -24)), I32)
    magnitude = b.select(b.icmp_unsigned("==", exponent, _c(0)), tiny,
                         b.select(b.icmp_unsigned("==", exponent, _c(31)), special, normal))
    b.ret(b.bitcast(b.or_(sign, magnitude), FLOAT))


def _round_to_half(b: ir.IRBuilder, u: ir.Value) -> ir.Value:
    """The float16 (as ``half``) nearest the float32 whose bits are ``u``, ties to even."""
    sign = b.and_(b.lshr(u, _c(16)), _c(0x8000))
    a = b.and_(u, _c(0x7FFFFFFF))
    nan = b.or_(_c(0x7E00), b.and_(b.lshr(a, _c(13)), _c(0x3FF)))
    # Normal float16: drop 13 bits, rounding to even; a carry moves into the exponent (up to infinity).
    rebased = b.sub(a, _c(0x38000000))  # the exponent bias 127 -> 15
    odd = b.and_(b.lshr(rebased, _c(13)), _c(1))
    normal = b.lshr(b.add(b.add(rebased, _c(0xFFF)), odd), _c(13))
    # Subnormal float16: the value in units of 2**-24 is m >> s, rounded to even.
    exponent = b.lshr(a, _c(23))
    m = b.or_(b.and_(a, _c(0x7FFFFF)), _c(0x800000))
    s = b.sub(_c(126), exponent)
    s = b.select(b.icmp_unsigned(">", s, _c(24)), _c(24), s)  # only for values below 2**-25 (zero anyway)
    quotient = b.lshr(m, s)
    remainder = b.and_(m, b.sub(b.shl(_c(1), s), _c(1)))
    halfway = b.shl(_c(1), b.sub(s, _c(1)))
    up = b.or_(b.icmp_unsigned(">", remainder, halfway),
               b.and_(b.icmp_unsigned("==", remainder, halfway), b.icmp_unsigned("!=", b.and_(quotient, _c(1)), _c(0))))
    subnormal = b.add(quotient, b.zext(up, I32))
    magnitude = b.select(
        b.icmp_unsigned(">", a, _c(0x7F800000)), nan,
        b.select(b.icmp_unsigned(">=", a, _c(0x477FF000)), _c(0x7C00),  # >= 65520 rounds to infinity
                 b.select(b.icmp_unsigned(">=", a, _c(0x38800000)), normal,  # >= 2**-14
                          b.select(b.icmp_unsigned("<=", a, _c(0x33000000)), _c(0), subnormal))))  # <= 2**-25
    return b.bitcast(b.trunc(b.or_(sign, magnitude), I16), HALF)


def _truncate_float(module: ir.Module) -> None:
    """``half __truncsfhf2(float)``."""
    fn, b = _function(module, "__truncsfhf2")
    b.ret(_round_to_half(b, b.bitcast(fn.args[0], I32)))


def _truncate_double(module: ir.Module) -> None:
    """``half __truncdfhf2(double)``: through float32 rounded to odd, so the result is rounded once."""
    fn, b = _function(module, "__truncdfhf2")
    d = fn.args[0]
    f = b.fptrunc(d, FLOAT)
    back = b.fpext(f, DOUBLE)
    inexact = b.fcmp_ordered("!=", back, d)
    away = b.fcmp_ordered(">", b.call(_fabs(module), [back]), b.call(_fabs(module), [d]))
    u = b.bitcast(f, I32)
    u = b.sub(u, b.zext(b.and_(inexact, away), I32))  # toward zero: one float32 step down in magnitude
    u = b.or_(u, b.zext(inexact, I32))  # to odd
    b.ret(_round_to_half(b, u))


def _fabs(module: ir.Module) -> ir.Function:
    name = "llvm.fabs.f64"
    if name in module.globals:
        return module.globals[name]
    return ir.Function(module, ir.FunctionType(DOUBLE, [DOUBLE]), name=name)


def define_conversions(module: ir.Module) -> None:
    """Define the three conversions in ``module`` (once)."""
    for name, define in (("__extendhfsf2", _extend), ("__truncsfhf2", _truncate_float),
                         ("__truncdfhf2", _truncate_double)):
        if name not in module.globals:
            define(module)


def uses_half(text: str) -> bool:
    """Whether LLVM IR ``text`` has ``half`` values (scalars or vectors)."""
    return " half" in text or "x half>" in text
