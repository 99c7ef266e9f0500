"""``loom.hybrid.build`` and :class:`HybridModule`: a schedule as hybrid script source (``tvm.hybrid.build``).

``build(sch, inputs, outputs)`` lowers the schedule to its statement over
tensors (loops, ifs, stores: what it computes, before memory is laid out) and
prints it as one hybrid function (:func:`~loom.hybrid.dump.dump_source`).  The
:class:`HybridModule` holding that text is callable as the function itself:
on numpy arrays it runs the text as Python, on Loom tensors it parses the text
into a hybrid operation.  ``save(path)`` writes the text to a file, and
``HybridModule().load(path)`` (or ``HybridModule(text)``) makes a module again,
so a schedule can be edited by hand as Python and compiled back.
"""

from __future__ import annotations

import ast
import itertools
import linecache
import threading
from typing import Any, Optional, Sequence

from ..errors import LoomTypeError, LoomValueError
from ..ir.recursion import deep_recursion
from ..te.tensor import Tensor
from .api import HybridFunction
from .dump import dump_source
from .errors import HybridSyntaxError, Source

__all__ = ["HybridModule", "build"]

_COUNTER = itertools.count()  # in-memory sources get distinct file names (tracebacks show their lines)
_COUNTER_LOCK = threading.Lock()


def _function_of(text: str, filename: str, name: Optional[str]) -> tuple[HybridFunction, str]:
    """The hybrid function a module's text defines, compiled, and its name.

    The text holds one top-level function; imports, a docstring and decorators around it are allowed
    (decorators are not run: the function is made a hybrid function here).
    """
    try:
        tree = ast.parse(text, filename)
    except SyntaxError as err:
        raise HybridSyntaxError(f"the hybrid module is not valid Python: {err.msg}", filename, err.lineno or 0,
                                err.offset or 0, err.text or "") from None
    defs = [n for n in tree.body if isinstance(n, ast.FunctionDef)]
    others = [n for n in tree.body if not isinstance(n, (ast.FunctionDef, ast.Import, ast.ImportFrom))
              and not (isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant))]
    if len(defs) != 1 or others:
        found = ", ".join(f"{type(n).__name__} at line {n.lineno}" for n in (defs + others)) or "nothing"
        raise LoomValueError(f"a hybrid module ({filename}) holds one function definition, plus imports; "
                             f"found {found}")
    fdef = defs[0]
    if name is not None and fdef.name != name:
        raise LoomValueError(f"the hybrid module ({filename}) defines {fdef.name}, not {name}")
    lines = text.splitlines(keepends=True)
    own = lines[fdef.lineno - 1:fdef.end_lineno]
    # Blank lines in front keep the file's line numbers in tracebacks of the compiled function.
    code = compile("\n" * (fdef.lineno - 1) + "".join(own), filename, "exec")
    namespace: dict[str, Any] = {"__name__": f"loom.hybrid.module.{fdef.name}"}
    exec(code, namespace)  # noqa: S102 - the user's own module text, as TVM's HybridModule imports it
    source = Source(filename, tuple(own), fdef.lineno, 0, fdef.name)
    return HybridFunction(namespace[fdef.name], source), fdef.name


class HybridModule:
    """Hybrid script source as a callable module (what :func:`build` returns).

    ``HybridModule(src)`` compiles the text ``src``, one hybrid function;
    ``HybridModule()`` is empty until :meth:`load` reads a file.  Calling the
    module calls the function: numpy arrays in, the arrays out (emulation);
    tensors in, the output tensor(s) of a new hybrid operation out.

    >>> import numpy as np
    >>> import loom
    >>> mod = loom.hybrid.HybridModule('''
    ... def twice(a):
    ...     b = output_tensor(a.shape, a.dtype)
    ...     for i in range(a.shape[0]):
    ...         b[i] = a[i] * 2.0
    ...     return b
    ... ''')
    >>> mod.name, mod(np.arange(3, dtype="float32"))
    ('twice', array([0., 2., 4.], dtype=float32))
    >>> B = mod(loom.placeholder((3,), name="a"))
    >>> type(B.op).__name__
    'HybridOp'
    """

    def __init__(self, src: Optional[str] = None, name: Optional[str] = None) -> None:
        self.name: Optional[str] = name
        self._src: Optional[str] = None
        self._func: Optional[HybridFunction] = None
        if src is not None:
            if not isinstance(src, str):
                raise LoomTypeError(f"HybridModule takes the source text, got {type(src).__name__} (to read a "
                                    f"file, use HybridModule().load(path))")
            if "\n" not in src and src.rstrip().endswith(".py"):  # TVM's constructor takes text, not a file
                raise LoomValueError(f"HybridModule takes the source text, got {src!r}, which looks like a path; "
                                     f"read a file with HybridModule().load(path)")
            with _COUNTER_LOCK:
                k = next(_COUNTER)
            filename = f"<loom.hybrid.HybridModule {name or 'source'} #{k}>"
            linecache.cache[filename] = (len(src), None, src.splitlines(keepends=True), filename)
            self._set(src, filename)

    def _set(self, src: str, filename: str) -> None:
        func, found = _function_of(src, filename, self.name)
        self._src, self._func, self.name = src, func, found

    def __repr__(self) -> str:
        return f"<HybridModule {self.name}>" if self._func is not None else "<HybridModule (empty)>"

    @property
    def function(self) -> HybridFunction:
        """The hybrid function of the source."""
        if self._func is None:
            raise LoomValueError("this HybridModule is empty: give it source text, or load() a file")
        return self._func

    def __call__(self, *args: Any) -> Any:
        return self.function(*args)

    def get_source(self) -> str:
        """The hybrid script text (``tvm.hybrid.HybridModule.get_source``)."""
        self.function  # noqa: B018 - the empty-module error
        assert self._src is not None
        return self._src

    @property
    def source(self) -> str:
        """The hybrid script text."""
        return self.get_source()

    def save(self, path: str) -> str:
        """Write the source to ``path`` (``.py`` appended when missing, as TVM does); returns the path written.

        >>> import os, tempfile, loom
        >>> mod = loom.hybrid.HybridModule("def one(a):\\n    b = output_tensor((1,), 'int32')\\n"
        ...                                "    b[0] = 1\\n    return b\\n")
        >>> path = mod.save(os.path.join(tempfile.mkdtemp(), "one"))
        >>> os.path.basename(path), loom.hybrid.HybridModule().load(path).get_source() == mod.get_source()
        ('one.py', True)
        """
        src = self.get_source()
        path = str(path)
        if not path.endswith(".py"):
            path += ".py"
        try:
            with open(path, "w", encoding="utf-8") as f:
                f.write(src)
        except OSError as err:
            raise LoomValueError(f"HybridModule.save: cannot write {path}: {err}") from err
        return path

    def load(self, path: str) -> HybridModule:
        """Read a hybrid module's source from the Python file ``path``; returns the module itself."""
        try:
            with open(path, encoding="utf-8") as f:
                src = f.read()
        except OSError as err:
            raise LoomValueError(f"HybridModule.load: cannot read {path}: {err}") from err
        linecache.checkcache(str(path))
        self._set(src, str(path))
        return self


def build(sch: Any, inputs: Sequence[Any], outputs: Any, name: str = "hybrid_func") -> HybridModule:
    """The hybrid script of a schedule, as a :class:`HybridModule` (``tvm.hybrid.build``).

    ``inputs`` are the tensors and variables the function takes, in order; ``outputs`` the
    tensor(s) it returns.  The schedule's loop transformations are in the text: split loops,
    reordered loops, guards of uneven splits, thread bindings, producers computed at a loop.

    >>> import numpy as np
    >>> import loom
    >>> A = loom.placeholder((6,), name="A")
    >>> B = loom.compute((6,), lambda i: A[i] + 1.0, name="B")
    >>> s = loom.create_schedule(B.op)
    >>> xo, xi = s[B].split(B.op.axis[0], factor=2)
    >>> s[B].unroll(xi)
    >>> mod = loom.hybrid.build(s, [A], [B], name="add_one")
    >>> print(mod.get_source())
    def add_one(A):
        B = output_tensor((6,), 'float32')
        for i_outer in range(3):
            for i_inner in unroll(2):
                B[i_outer * 2 + i_inner] = A[i_outer * 2 + i_inner] + 1.0
        return B
    <BLANKLINE>
    >>> mod(np.arange(6, dtype="float32"))
    array([1., 2., 3., 4., 5., 6.], dtype=float32)
    """
    from ..te.schedule import Schedule
    from ..te.schedule_ops import schedule_to_stmt

    if not isinstance(sch, Schedule):
        raise LoomTypeError(f"hybrid.build takes a Schedule (loom.create_schedule), got {type(sch).__name__}")
    outs = [outputs] if isinstance(outputs, Tensor) else outputs
    if isinstance(outs, (str, bytes)) or not isinstance(outs, Sequence):
        raise LoomTypeError(f"hybrid.build: outputs must be a Tensor or a list of Tensors, got "
                            f"{type(outputs).__name__}")
    if isinstance(inputs, (str, bytes)) or not isinstance(inputs, Sequence):
        raise LoomTypeError(f"hybrid.build: inputs must be a list of Tensors and Vars, got {type(inputs).__name__}")
    with deep_recursion(f"hybrid.build {name}"):
        stmt = schedule_to_stmt(sch)
    return HybridModule(dump_source(stmt, list(inputs), list(outs), name), name)
