"""The C symbol of each compiled function: its name, unless that name could collide.

Native code calls the C and math libraries (``expf``, ``memcpy``, ``aligned_alloc``),
the OpenMP runtime (``GOMP_parallel``, ``omp_get_thread_num``) and the runtime's
own globals (``loom_*``); the C backend's source also includes the standard
headers, whose macros and types (``NAN``, ``bool``, ``uint``, ``linux``) replace any
identifier spelled alike.  A function whose symbol were one of those names
would call itself instead of the library, or not compile.  So
:func:`function_symbol` keeps a function's name as its symbol only when the name
is a plain ASCII C identifier outside every such name, and otherwise spells it
``loom_fn_<escaped name>``.  The escaping is injective and no plain name starts
with ``loom_``, so two functions never share a symbol.

The name users call (``mod["exp"]``, ``get_function``) is unchanged; modules and
exported libraries record each function's symbol (``symbols`` in the library's
metadata), so nothing ever recomputes it from an old rule.

>>> function_symbol("matmul"), function_symbol("exp"), function_symbol("GOMP_parallel")
('matmul', 'loom_fn_exp', 'loom_fn_GOMP__parallel')
>>> function_symbol("int"), function_symbol("caf\\u00e9"), function_symbol("a.b")
('loom_fn_int', 'loom_fn_caf_e9', 'loom_fn_a_2eb')
"""

from __future__ import annotations

import re

__all__ = ["function_symbol", "is_reserved_name", "escape_name", "MANGLED_PREFIX"]

#: The start of every mangled symbol (and of the runtime's own names, which no plain symbol may take).
MANGLED_PREFIX = "loom_fn_"

_C_KEYWORDS = """
alignas alignof asm auto bool break case char complex const constexpr continue default do double else enum
extern false float for goto if imaginary inline int long noreturn nullptr register restrict return short
signed sizeof static static_assert struct switch thread_local true typedef typeof typeof_unqual union
unsigned void volatile while
"""

#: libm, as glibc declares it (every entry also with the suffixes of :data:`_MATH_SUFFIXES`).
_MATH = """
acos acosh asin asinh atan atan2 atanh canonicalize cbrt ceil copysign cos cosh drem erf erfc exp exp10 exp2
expm1 fabs fadd fdim fdiv ffma finite floor fma fmax fmaximum fmaximum_mag fmaximum_mag_num fmaximum_num
fmaxmag fmin fminimum fminimum_mag fminimum_mag_num fminimum_num fminmag fmod fmul frexp fromfp fromfpx fsqrt
fsub gamma getpayload hypot ilogb isinf isnan j0 j1 jn ldexp lgamma lgamma_r llogb llrint llround log log10
log1p log2 logb lrint lround modf nan nearbyint nextafter nextdown nexttoward nextup pow pow10 remainder remquo
rint round roundeven scalb scalbln scalbn setpayload setpayloadsig significand sin sincos sinh sqrt tan tanh
tgamma totalorder totalordermag trunc ufromfp ufromfpx y0 y1 yn
daddl ddivl dfmal dmull dsqrtl dsubl
"""
_MATH_SUFFIXES = ("", "f", "l", "f16", "f32", "f64", "f128", "f32x", "f64x", "f128x", "_r", "f_r", "l_r")

#: Everything else the headers of C sources (math, stdbool, stdint, stdlib, string) declare or
#: define, and what compilers and LLVM call on their own (``memset`` for a zeroing loop...).
_LIBRARY = """
a64l abort abs aligned_alloc alloca arc4random arc4random_buf arc4random_uniform at_quick_exit atexit atof
atoi atol atoll basename bcmp bcopy be16toh be32toh be64toh bsearch bzero calloc canonicalize_file_name
clearenv div drand48 drand48_r ecvt ecvt_r erand48 erand48_r errno exit explicit_bzero fcvt fcvt_r fd_mask
fd_set ffs ffsl ffsll fpclassify free gcvt getenv getloadavg getpt getsubopt grantpt htobe16 htobe32 htobe64
htole16 htole32 htole64 index initstate initstate_r iscanonical iseqsig isfinite isgreater isgreaterequal
isless islessequal islessgreater isnormal issignaling issubnormal isunordered iszero jrand48 jrand48_r l64a
labs lcong48 lcong48_r ldiv le16toh le32toh le64toh linux llabs lldiv lrand48 lrand48_r malloc
math_errhandling mblen mbstowcs mbtowc memccpy memchr memcmp memcpy memfrob memmem memmove mempcpy memrchr
memset memset_pattern16 mkdtemp mkostemp mkostemp64 mkostemps mkostemps64 mkstemp mkstemp64 mkstemps
mkstemps64 mktemp mrand48 mrand48_r nrand48 nrand48_r offsetof on_exit posix_memalign posix_openpt pselect
ptsname ptsname_r putenv qecvt qecvt_r qfcvt qfcvt_r qgcvt qsort qsort_r quick_exit rand rand_r random
random_r rawmemchr realloc reallocarray realpath rindex rpmatch secure_getenv seed48 seed48_r select setenv
setstate setstate_r sigabbrev_np sigdescr_np signbit signgam srand srand48 srand48_r srandom srandom_r stpcpy
stpncpy strcasecmp strcasecmp_l strcasestr strcat strchr strchrnul strcmp strcoll strcoll_l strcpy strcspn
strdup strdupa strerror strerror_l strerror_r strerrordesc_np strerrorname_np strfromd strfromf strfroml
strfry strlen strncasecmp strncasecmp_l strncat strncmp strncpy strndup strndupa strnlen strpbrk strrchr
strsep strsignal strspn strstr strtod strtod_l strtof strtof_l strtok strtok_r strtol strtol_l strtold
strtold_l strtoll strtoll_l strtoq strtoul strtoul_l strtoull strtoull_l strtouq strverscmp strxfrm strxfrm_l
system u_char u_int u_long u_short uint ulong unix unlockpt unsetenv ushort valloc wcstombs wctomb
args error
BIG_ENDIAN BYTE_ORDER EXIT_FAILURE EXIT_SUCCESS INFINITY LITTLE_ENDIAN MATH_ERREXCEPT MATH_ERRNO MAXFLOAT
MB_CUR_MAX NAN NFDBITS NULL PDP_ENDIAN PTRDIFF_MAX PTRDIFF_MIN PTRDIFF_WIDTH RAND_MAX SIZE_MAX SIZE_WIDTH
WCONTINUED WEXITED WEXITSTATUS WIFCONTINUED WIFEXITED WIFSIGNALED WIFSTOPPED WNOHANG WNOWAIT WSTOPPED
WSTOPSIG WTERMSIG WUNTRACED
"""

#: Families of names: runtimes' prefixes (the runtime's own ``loom_``, OpenMP's), header macros
#: by pattern, type names (``*_t``, and the C backend's vector typedefs such as ``float32x4``).
_PATTERNS = re.compile(
    r"(loom_|GOMP_|omp_|kmp_|ompt_).*"
    r"|.*_t"
    r"|(bool|u?int\d+|float\d+|bfloat\d+)x\d+"
    r"|U?INT\w*_(MIN|MAX|C|WIDTH)|(SIG_ATOMIC|WCHAR|WINT)_\w+|M_\w+|HUGE_VAL\w*|SNAN\w*|FP_\w+|FD_\w+"
    r"|str(to|from)\w+")

_MATH_NAMES = _MATH.split()
_RESERVED = frozenset(_C_KEYWORDS.split()) | frozenset(_LIBRARY.split()) | frozenset(
    base + suffix for base in _MATH_NAMES for suffix in _MATH_SUFFIXES)
_PLAIN = re.compile(r"[A-Za-z][A-Za-z0-9_]*")


def is_reserved_name(name: str) -> bool:
    """Whether ``name``, though a C identifier, belongs to a library, a runtime or the C language.

    >>> [is_reserved_name(n) for n in ("sinf", "omp_get_thread_num", "uint32_t", "float32x8", "NAN", "scale")]
    [True, True, True, True, True, False]
    """
    return name in _RESERVED or _PATTERNS.fullmatch(name) is not None


def escape_name(name: str) -> str:
    """An injective spelling of ``name`` in ``[A-Za-z0-9_]``: ``_`` doubles, other characters become hex.

    >>> escape_name("main_kernel0"), escape_name("a.b"), escape_name("\\u03c0")
    ('main__kernel0', 'a_2eb', '_u0003c0_')
    """
    out = []
    for c in name:
        if c.isascii() and c.isalnum():
            out.append(c)
        elif c == "_":
            out.append("__")
        else:
            out.append("_" + (f"{ord(c):02x}" if ord(c) < 256 else f"u{ord(c):06x}_"))
    return "".join(out)


def function_symbol(name: str) -> str:
    """The C symbol of a compiled function named ``name`` (see the module docstring)."""
    if _PLAIN.fullmatch(name) and not is_reserved_name(name):
        return name
    return MANGLED_PREFIX + escape_name(name)
