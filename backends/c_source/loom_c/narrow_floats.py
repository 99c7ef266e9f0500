"""float16 and bfloat16 in C: 16-bit patterns, converted by hand where the IR converts.

C has no portable 16-bit float type, so the C backend keeps a float16 or
bfloat16 value's bits in a ``uint16_t`` (in memory and in variables alike)
and computes as numpy does: :func:`loom.transform.legalize_narrow_floats`
first writes every operation in float32 with a cast back to the narrow type,
which leaves only three kinds of conversion for the renderer: to float32,
from float32 and (float16) from float64.  The helpers below do those,
rounding to nearest even with float16 subnormals, overflowing to infinity,
and keeping NaNs NaN (quiet, same sign, top payload bits), bit for bit as
numpy, ml_dtypes and the llvm backend do.  A float64 is rounded to float16
once, through float32 rounded to odd.

>>> import loom
>>> from loom.ir import BufferStore, PrimFunc
>>> from loom_c.codegen import generate
>>> A = loom.decl_buffer((4,), "float16", name="A")
>>> f = PrimFunc([A.data], BufferStore(A, A[0] * A[1], [2]), buffer_map={A.data: A})
>>> text = generate(f).text
>>> "A[2] = loom_f32_to_f16((loom_f16_to_f32(A[0]) * loom_f16_to_f32(A[1])));" in text
True
"""

from __future__ import annotations

from typing import Any

import numpy as np

from loom.codegen import CodegenError
from loom.ir import expr as E

__all__ = ["HELPERS", "narrow_cast", "narrow_literal", "from_word", "to_word", "is_narrow"]

#: Each helper's C definition, by name (each also needs the ones named before it in its text).
HELPERS = {
    "loom_f16_to_f32": r"""static inline float loom_f16_to_f32(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu, bits;
  if (e == 0) {  /* zero or subnormal: m * 2**-24, exact in float */
    float f = (float)m * 0x1p-24f;
    memcpy(&bits, &f, sizeof bits);
    bits |= sign;
  } else if (e == 31) {
    bits = sign | 0x7f800000u | (m << 13);
  } else {
    bits = sign | ((e + 112u) << 23) | (m << 13);
  }
  float out; memcpy(&out, &bits, sizeof out); return out;
}""",
    "loom_f32_bits_to_f16": r"""static inline uint16_t loom_f32_bits_to_f16(uint32_t u) {
  uint32_t sign = (u >> 16) & 0x8000u, a = u & 0x7fffffffu;
  if (a > 0x7f800000u) return (uint16_t)(sign | 0x7e00u | ((a >> 13) & 0x3ffu));  /* NaN, made quiet */
  if (a >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u);  /* >= 65520: infinity */
  if (a >= 0x38800000u) {  /* normal: drop 13 bits, ties to even (a carry may reach the exponent) */
    uint32_t r = a - 0x38000000u;
    return (uint16_t)(sign | ((r + 0xfffu + ((r >> 13) & 1u)) >> 13));
  }
  if (a <= 0x33000000u) return (uint16_t)sign;  /* <= 2**-25: zero */
  uint32_t m = (a & 0x7fffffu) | 0x800000u, s = 126u - (a >> 23);  /* subnormal: m >> s, ties to even */
  uint32_t q = m >> s, rem = m & ((1u << s) - 1u), half = 1u << (s - 1u);
  return (uint16_t)(sign | (q + (rem > half || (rem == half && (q & 1u)))));
}""",
    "loom_f32_to_f16": r"""static inline uint16_t loom_f32_to_f16(float f) {
  uint32_t u; memcpy(&u, &f, sizeof u); return loom_f32_bits_to_f16(u);
}""",
    "loom_f64_to_f16": r"""static inline uint16_t loom_f64_to_f16(double d) {
  float f = (float)d;  /* rounded to odd: toward zero, the last bit set when inexact */
  double back = (double)f;
  uint32_t u; memcpy(&u, &f, sizeof u);
  if (back != d && back == back) {
    if (fabs(back) > fabs(d)) u -= 1u;
    u |= 1u;
  }
  return loom_f32_bits_to_f16(u);
}""",
    "loom_bf16_to_f32": r"""static inline float loom_bf16_to_f32(uint16_t b) {
  uint32_t u = (uint32_t)b << 16; float f; memcpy(&f, &u, sizeof f); return f;
}""",
    "loom_f32_to_bf16": r"""static inline uint16_t loom_f32_to_bf16(float f) {
  uint32_t u; memcpy(&u, &f, sizeof u);
  if (f != f) return (uint16_t)((u | 0x400000u) >> 16);  /* NaN, made quiet */
  return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}""",
}

#: The helpers each conversion needs, in definition order.
_NEEDS = {
    "loom_f16_to_f32": ("loom_f16_to_f32",),
    "loom_f32_to_f16": ("loom_f32_bits_to_f16", "loom_f32_to_f16"),
    "loom_f64_to_f16": ("loom_f32_bits_to_f16", "loom_f64_to_f16"),
    "loom_bf16_to_f32": ("loom_bf16_to_f32",),
    "loom_f32_to_bf16": ("loom_f32_to_bf16",),
}

_CONVERSIONS = {
    ("float16", "float32"): "loom_f16_to_f32", ("bfloat16", "float32"): "loom_bf16_to_f32",
    ("float32", "float16"): "loom_f32_to_f16", ("float64", "float16"): "loom_f64_to_f16",
    ("float32", "bfloat16"): "loom_f32_to_bf16",
}


def is_narrow(t: Any) -> bool:
    """Whether ``t``'s elements are float16 or bfloat16."""
    return str(t.element_of()) in ("float16", "bfloat16")


def helper(r: Any, name: str) -> str:
    """Declare ``name`` (and what it calls) in the file being rendered; returns ``name``."""
    for needed in _NEEDS[name]:
        r.declarations.setdefault(needed, HELPERS[needed])
    return name


def narrow_cast(r: Any, n: E.Cast) -> str | None:
    """The C text of a cast to or from a 16-bit float, or None when neither side is one."""
    src, dst = str(n.value.dtype.element_of()), str(n.dtype.element_of())
    if not (is_narrow(n.value.dtype) or is_narrow(n.dtype)):
        return None
    if src == dst:
        return r.expr(n.value)
    name = _CONVERSIONS.get((src, dst))
    if name is None:  # legalize_narrow_floats leaves only the conversions above
        raise CodegenError(f"the C backend converts {src} to {dst} only through float32: legalize the IR first "
                           f"(loom.transform.legalize_narrow_floats) ({n})")
    fn = helper(r, name)
    return r.elementwise(n.dtype, [n.value], lambda a: f"{fn}({a})")


def narrow_literal(n: E.FloatImm) -> str:
    """A float16 or bfloat16 constant as its bit pattern."""
    if str(n.dtype) == "bfloat16":
        import ml_dtypes

        bits = int(np.array(n.value, dtype=np.float32).astype(ml_dtypes.bfloat16).view(np.uint16))
    else:
        with np.errstate(over="ignore"):
            bits = int(np.array(n.value, dtype=np.float64).astype(np.float16).view(np.uint16))
    return f"((uint16_t)0x{bits:04x}u)"


def from_word(r: Any, t: Any, double: str) -> str:
    """A scalar parameter of 16-bit float type ``t`` from the C double ``double`` its ABI word holds."""
    if str(t) == "bfloat16":
        return f"{helper(r, 'loom_f32_to_bf16')}((float)({double}))"
    return f"{helper(r, 'loom_f64_to_f16')}({double})"


def to_word(r: Any, t: Any, text: str) -> str:
    """The C double of the 16-bit float value ``text`` (of type ``t``), for an ABI word."""
    name = "loom_bf16_to_f32" if str(t) == "bfloat16" else "loom_f16_to_f32"
    return f"(double){helper(r, name)}({text})"
