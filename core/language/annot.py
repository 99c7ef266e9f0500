"""Kernel argument annotations (seed 001): how each argument of a ``@loom.jit`` kernel is read.

An annotation does three things for its parameter:

1. says whether the argument is passed to the compiled kernel at every call
   (:meth:`Annot.is_kernel_arg`: tensors and ``T.dyn`` scalars) or compiled in
   (static Python values, dtypes);
2. turns the argument into its part of the JIT cache key
   (:meth:`Annot.get_key_parser`): what about it changes the generated code;
3. makes the prim-func argument the kernel body is parsed against
   (:meth:`Annot.create_prim_func_arg`): a :class:`~loom.ir.Buffer`, a
   :class:`~loom.ir.Var`, or the static value itself.

The spellings users write are instances: ``T.Tensor[(M, "N"), "float32"]``,
``T.StridedTensor[(M, N), ("s0", 1), "float32"]``, ``T.dyn["N"]``, ``T.dtype``.

>>> import loom.language as T
>>> a = T.Tensor[(4, "N"), "float32"].with_name("A")
>>> a.is_kernel_arg(), a.get_key_parser()(None) is None
(True, True)
>>> vt = T.ArgVarTable()
>>> buf = a.create_prim_func_arg("A", None, vt)
>>> buf.name, [str(s) for s in buf.shape], str(buf.dtype)
('A', ['4', 'N'], 'float32')
>>> T.dyn[T.int64, "N"]
T.dyn[int64, 'N']
"""

from __future__ import annotations

import abc
from typing import Any, Callable, Literal, Optional

import numpy as np

from ..errors import LoomTypeError, LoomValueError
from ..ir import expr as E
from ..ir.dtype import DataType
from .arrays import is_array
from .dtypes import normalize_dtype

__all__ = [
    "Annot", "ArgVarTable", "Value", "BufferAnnot", "TensorAnnot", "StridedTensorAnnot", "FragmentBufferAnnot",
    "SharedBufferAnnot", "LocalBufferAnnot", "DynAnnot", "DTypeAnnot", "TIRAnnot", "Buffer", "static_key",
]

KeyParser = Callable[[Any], Any]


def _no_key(value: Any) -> None:
    """The key part of an argument that does not change the generated code."""
    return None


class ArgVarTable:
    """The Vars of a kernel's signature by name: one Var per dynamic name, shared by every use.

    ``static`` holds the static arguments by parameter name, so a shape entry that
    names a static parameter takes its value.

    >>> vt = ArgVarTable()
    >>> vt.get_or_create_var("N", "int32") is vt.get_or_create_var("N", "int32"), vt.create_tmp_name()
    (True, 'tmp_0')
    """

    def __init__(self) -> None:
        self.var_tab: dict[str, E.Var] = {}
        self.tmp_name_idx: int = 0
        self.static: dict[str, Any] = {}
        self.bound: dict[str, int] = {}  # sizes of dynamic names seen in this call's arguments (match_shape)

    def get_or_create_var(self, name: str, dtype: Any) -> E.Var:
        dtype = normalize_dtype(dtype, f"the dtype of {name}")
        found = self.var_tab.get(name)
        if found is None:
            found = self.var_tab[name] = E.Var(name, dtype)
        elif found.dtype != dtype:
            raise LoomTypeError(f"{name} is used as a {found.dtype} and as a {dtype}; a dynamic name has one dtype "
                                f"(write T.dyn[{dtype}, {name!r}] everywhere)")
        return found

    def create_tmp_name(self) -> str:
        name = f"tmp_{self.tmp_name_idx}"
        self.tmp_name_idx += 1
        return name

    def resolve(self, entry: Any, where: str, default_dtype: str = "int32") -> Any:
        """A shape or stride entry as the prim func sees it: a number, or a Var shared by name."""
        if isinstance(entry, bool):
            raise LoomTypeError(f"{where}: {entry!r} is not a size")
        if isinstance(entry, (int, np.integer)):
            return int(entry)
        if isinstance(entry, str):
            if entry in self.static:
                value = self.static[entry]
                if isinstance(value, bool) or not isinstance(value, int):
                    raise LoomTypeError(f"{where}: {entry!r} names the static parameter {entry}, whose value "
                                        f"{value!r} is not an int")
                return value
            found = self.var_tab.get(entry)  # a bare name takes the dtype its T.dyn[dtype, name] declared
            return found if found is not None else self.get_or_create_var(entry, default_dtype)
        if isinstance(entry, DynAnnot):
            if entry.name is None:
                raise LoomValueError(f"{where}: a T.dyn in a shape needs a name (T.dyn['N'])")
            return self.get_or_create_var(entry.name, entry.dtype or default_dtype)
        if isinstance(entry, E.PrimExpr) and entry.dtype.is_integer:
            return entry
        raise LoomTypeError(f"{where}: a size is an int, a name ('N'), T.dyn['N'] or an integer expression, "
                            f"got {entry!r}")


class Annot(abc.ABC):
    """Base class of kernel argument annotations (see the module docstring)."""

    name: Optional[str] = None

    def is_kernel_arg(self) -> bool:
        """Whether the argument is passed to the compiled kernel at every call."""
        return False

    @abc.abstractmethod
    def with_name(self, name: str) -> Annot:
        """This annotation for the parameter ``name``."""

    @abc.abstractmethod
    def get_key_parser(self) -> KeyParser:
        """A function from the argument to its part of the cache key (hashable; None: nothing)."""

    @abc.abstractmethod
    def create_prim_func_arg(self, name: str, value: Any, vt: ArgVarTable) -> Any:
        """The prim func's argument for ``value``: a Buffer, a Var, or the static value itself."""

    def promote(self) -> Optional[Annot]:
        """A fixed annotation equivalent to this one (a :class:`TIRAnnot`), or None when there is none."""
        return None

    def check_value(self, value: Any, where: str, vt: ArgVarTable) -> None:
        """Raise a LoomError naming ``where`` when ``value`` contradicts the annotation (checked on a miss)."""

    def describe_key(self, part: Any) -> str:
        """The key part of an argument in words."""
        return "nothing (it does not change the code)" if part is None else repr(part)


# ------------------------------------------------------------------------------------------ values


def static_key(value: Any, where: str = "argument") -> Any:
    """A static argument as a hashable key part that tells 1, 1.0 and True apart.

    >>> static_key(3), static_key([1, 2.0])
    (('int', 3), ('tuple', (('int', 1), ('float', 2.0))))
    """
    if isinstance(value, np.generic):
        value = value.item()
    if value is None or isinstance(value, (bool, int, float, str)):
        return (type(value).__name__ if not isinstance(value, DataType) else "dtype", value)
    if isinstance(value, (tuple, list)):
        return ("tuple", tuple(static_key(v, where) for v in value))
    raise LoomTypeError(f"{where}: a static (compile-time) argument is a number, a string, None, a dtype or a "
                        f"tuple of them, got {type(value).__name__}; annotate a runtime argument with "
                        f"T.Tensor[...] or T.dyn[...]")


def static_value(value: Any) -> Any:
    """A static argument as the kernel body sees it: numpy scalars as Python numbers, lists as tuples."""
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, (tuple, list)):
        return tuple(static_value(v) for v in value)
    return value


class Value(Annot):
    """A scalar: ``static`` (compiled in, part of the key) or ``dynamic`` (a runtime Var argument)."""

    kind: Literal["static", "dynamic"] = "dynamic"

    def __init__(self, kind: Literal["static", "dynamic"] = "dynamic", name: Optional[str] = None,
                 dtype: Any = None, value: Any = None, creator: Optional[Callable[[], Any]] = None,
                 python_type: Optional[type] = None) -> None:
        if kind not in ("static", "dynamic"):
            raise LoomValueError(f"a Value is 'static' or 'dynamic', got {kind!r}")
        self.kind, self.name, self.value, self.creator = kind, name, value, creator
        self.dtype = normalize_dtype(dtype) if dtype is not None else None
        self.python_type = python_type  # a static parameter annotated int, float, bool or str

    def is_kernel_arg(self) -> bool:
        return self.kind == "dynamic"

    @classmethod
    def from_value(cls, value: Any, prefer_name: Optional[str] = None) -> Value:
        """A Var is dynamic (its name and dtype); anything else is a static value."""
        if isinstance(value, E.Var):
            return cls("dynamic", prefer_name or value.name, value.dtype, value)
        static_key(value, prefer_name or "argument")  # refuse what cannot be compiled in
        return cls("static", prefer_name, None, static_value(value))

    def with_name(self, name: str) -> Value:
        return type(self)(self.kind, self.name or name, self.dtype, self.value, self.creator, self.python_type)

    def get_key_parser(self) -> KeyParser:
        if self.kind == "dynamic":
            return _no_key
        where, want = f"static parameter {self.name}", self.python_type
        if want is None:
            return lambda v: static_key(v, where)

        def parse(v: Any) -> Any:
            ok = isinstance(v, want) or (want is float and isinstance(v, int)) or isinstance(v, np.generic) and \
                isinstance(v.item(), want)
            if not ok or (want is int and isinstance(v, bool)):
                raise LoomTypeError(f"{where} is annotated {want.__name__}, got {type(v).__name__} {v!r}")
            return static_key(float(v) if want is float else v, where)

        return parse

    def parse_key(self, target: Any) -> Any:
        """The key part of the argument ``target``."""
        return self.get_key_parser()(target)

    def create_prim_func_arg(self, name: str, value: Any, vt: ArgVarTable, create_arg: bool = True) -> Any:
        if self.kind == "static":
            v = self.value if value is None else value
            return static_value(float(v) if self.python_type is float else v)
        if not create_arg:
            return self.value
        return vt.get_or_create_var(self.name or name, self.dtype or "int32")

    def check_value(self, value: Any, where: str, vt: ArgVarTable) -> None:
        if self.kind != "dynamic":
            return
        dtype = self.dtype or DataType.of("int32")
        if is_array(value) or not isinstance(value, (int, float, bool, np.generic)):
            raise LoomTypeError(f"{where} is a runtime scalar (T.dyn[{dtype}]); got {type(value).__name__}")
        if dtype.is_integer and not isinstance(value, (int, np.integer)):
            raise LoomTypeError(f"{where} is a runtime {dtype} scalar (T.dyn[{dtype}]); got {type(value).__name__} "
                                f"{value!r}")

    def describe_key(self, part: Any) -> str:
        if self.kind == "dynamic":
            return f"runtime {self.dtype or 'int32'} scalar (not in the key)"
        return f"static value {_show_static(part)}"

    def __repr__(self) -> str:
        if self.kind == "static":
            shown = f"{self.name}: {self.python_type.__name__}" if self.python_type is not None and \
                self.value is None else f"{self.name}={self.value!r}" if self.name else repr(self.value)
            return f"Value(static, {shown})"
        return f"Value(dynamic, {self.name}: {self.dtype or 'int32'})"


def _show_static(part: Any) -> str:
    kind, value = part
    if kind == "tuple":
        return "(" + ", ".join(_show_static(p) for p in value) + ("," if len(value) == 1 else "") + ")"
    return repr(value) if kind != "dtype" else f"dtype {value}"


class DynAnnot(Value):
    """``T.dyn[int32]`` / ``T.dyn["N"]`` / ``T.dyn[int64, "N"]``: a runtime scalar, shared with shapes by name."""

    def __init__(self, kind: Literal["static", "dynamic"] = "dynamic", name: Optional[str] = None,
                 dtype: Any = None, value: Any = None, creator: Optional[Callable[[], Any]] = None,
                 python_type: Optional[type] = None) -> None:
        super().__init__("dynamic", name, dtype, value, creator)

    def __call__(self, dtype: Any = "int32", name: Optional[str] = None) -> DynAnnot:
        return DynAnnot("dynamic", name, dtype)

    def __getitem__(self, params: Any) -> DynAnnot:
        items = params if isinstance(params, tuple) else (params,)
        if len(items) == 2:
            dtype, name = items
            if not isinstance(name, str):
                raise LoomTypeError(f"T.dyn[dtype, name] takes a name string second, got {name!r}")
            return DynAnnot("dynamic", name, dtype)
        if len(items) == 1:
            (item,) = items
            if isinstance(item, str) and not _is_dtype_text(item):
                return DynAnnot("dynamic", item, "int32")
            return DynAnnot("dynamic", None, item)
        raise LoomTypeError(f"T.dyn takes [dtype], ['name'] or [dtype, 'name'], got {params!r}")

    def __repr__(self) -> str:
        dtype = self.dtype or "int32"
        return f"T.dyn[{dtype}, {self.name!r}]" if self.name else f"T.dyn[{dtype}]"


def _is_dtype_text(text: str) -> bool:
    try:
        DataType.of(text)
    except Exception:  # noqa: BLE001 - not a dtype spelling
        return False
    return True


def _is_dtype_like(value: Any) -> bool:
    if isinstance(value, str):
        return _is_dtype_text(value)
    if isinstance(value, (np.dtype, DataType)) or (isinstance(value, type) and issubclass(value, np.generic)):
        return True
    return (type(value).__module__ or "").startswith("torch") and "dtype" in type(value).__name__


# ------------------------------------------------------------------------------------------ dtypes


class DTypeAnnot(Annot):
    """``T.dtype``: a dtype argument, compiled in; it accepts str, numpy, Loom and torch dtypes.

    >>> import numpy as np
    >>> DTypeAnnot()(np.float32), DTypeAnnot()("float32")
    (DataType('float32'), DataType('float32'))
    """

    def __init__(self, name: Optional[str] = None) -> None:
        self.name = name

    def __call__(self, value: Any) -> DataType:
        return normalize_dtype(value)

    def is_kernel_arg(self) -> bool:
        return False

    def with_name(self, name: str) -> DTypeAnnot:
        return DTypeAnnot(name)

    def get_key_parser(self) -> KeyParser:
        where = f"dtype parameter {self.name}"
        return lambda v: str(normalize_dtype(v, where))

    def create_prim_func_arg(self, name: str, value: Any, vt: ArgVarTable) -> DataType:
        return normalize_dtype(value, f"dtype parameter {name}")

    def describe_key(self, part: Any) -> str:
        return f"dtype {part}"

    def __repr__(self) -> str:
        return "T.dtype"


# The tensor annotations live in their own module; they are part of this one's API (seed 001's layout).
from .buffer_annot import (  # noqa: E402
    Buffer, BufferAnnot, FragmentBufferAnnot, LocalBufferAnnot, SharedBufferAnnot, StridedTensorAnnot, TensorAnnot,
    TIRAnnot,
)
