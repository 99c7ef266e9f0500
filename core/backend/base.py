"""What a backend is: four stages the core drives, and the values passed between them.

A backend turns the lowered functions of one target into a runtime Module in
four steps, each a method of :class:`Backend`:

``options(target) -> BackendOptions``
    everything of the target (and of the backend's environment) that changes the
    generated code, as a frozen value whose :meth:`BackendOptions.digest` is stable
    across processes;
``render(mod, options) -> {format: source}``
    source text (LLVM IR, C, CUDA C...) of the lowered IRModule; the first entry
    is what ``get_source()`` shows by default;
``compile(sources, options) -> bytes``
    the compiled artifact (an object file, a shared library, a cubin);
``load(data, info) -> Module``
    a callable runtime Module from the artifact and its :class:`ModuleInfo`.

The core (:mod:`loom.backend.stages`) caches ``compile``'s output on disk, keyed
by the sources, the options' digest, :attr:`Backend.version` and
:meth:`Backend.compiler_identity`, so a second process building the same kernel
only renders and loads.

>>> opts = BackendOptions()
>>> opts.digest() == BackendOptions().digest()
True
"""

from __future__ import annotations

import hashlib
import json
from typing import TYPE_CHECKING, Any, ClassVar, Mapping, Sequence

import attrs

from ..errors import LoomError, LoomTypeError, SerializationError
from ..ir.function import IRModule, PrimFunc
from ..ir.stmt import no_op

if TYPE_CHECKING:
    from ..runtime.module import Module
    from ..target import Target

__all__ = ["Backend", "BackendOptions", "ModuleInfo", "Artifact", "signature_of", "THREAD_SEMANTICS",
           "pack_sections", "unpack_sections", "ToolchainError"]

#: How a backend runs thread-bound (``blockIdx``/``threadIdx``) code:
#: ``"gpu"``: blocks of concurrent threads meeting at barriers (cuda, interp, ext_dev);
#: ``"serial"``: one thread after another, so code that needs a barrier is refused at build time.
THREAD_SEMANTICS = ("gpu", "serial")


class ToolchainError(LoomError):
    """An external compiler a backend runs (cc, nvcc...) failed or is missing; the message holds its
    command and output, which backends' ``compile`` stages raise for users to act on.

    ``command`` is the argument list, ``output`` the compiler's messages and ``source`` the text that
    failed (None when the compiler could not run).

    >>> ToolchainError("nvcc failed", ["nvcc", "-cubin"], "error: ...").command
    ['nvcc', '-cubin']
    """

    def __init__(self, message: str, command: Sequence[str] = (), output: str = "",
                 source: str | None = None) -> None:
        super().__init__(message)
        self.command = list(command)
        self.output = output
        self.source = source


def _plain(value: Any, where: str) -> Any:
    """``value`` as JSON-ready data (tuples become lists); a TypeError for anything else."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (list, tuple)):
        return [_plain(v, where) for v in value]
    if isinstance(value, Mapping):
        return {str(k): _plain(v, where) for k, v in sorted(value.items(), key=lambda kv: str(kv[0]))}
    raise LoomTypeError(f"{where}: option values must be None, bool, int, float, str, lists or dicts of "
                        f"them, got {type(value).__name__} {value!r}")


@attrs.frozen
class BackendOptions:
    """Base class of a backend's options: a frozen attrs class of plain values.

    Subclass it with one field per setting that changes the generated code::

        @attrs.frozen
        class ToyOptions(BackendOptions):
            cores: int = 4
            fast_math: bool = False

    :meth:`digest` hashes the class name and every field, so it is the same in
    every process (unlike ``hash()``).
    """

    def to_json(self) -> dict[str, Any]:
        """The fields as JSON-ready data, with the class name under ``"options"``."""
        name = f"{type(self).__module__}.{type(self).__qualname__}"
        return {"options": name, **{k: _plain(v, name) for k, v in attrs.asdict(self, recurse=False).items()}}

    def digest(self) -> str:
        """A sha256 hex digest of :meth:`to_json`, stable across processes and machines."""
        return hashlib.sha256(json.dumps(self.to_json(), sort_keys=True).encode("utf-8")).hexdigest()


class Artifact(bytes):
    """The bytes ``compile`` returned, plus the file holding them when the disk cache has one.

    :attr:`path` (None when the artifact was not cached) says where the entry is,
    for messages and tools.  Load from the bytes, which passed the cache's
    check, never from that file: it may be damaged, rebuilt or evicted while the
    module lives, and ``dlopen`` of a path already loaded returns the old library.
    A backend that needs a file writes the bytes to a private one.
    """

    path: str | None

    def __new__(cls, data: bytes, path: str | None = None) -> Artifact:
        self = super().__new__(cls, data)
        self.path = path
        return self


_SECTIONS_MAGIC = b"loom-sections-1\n"


def pack_sections(sections: Mapping[str, bytes | str]) -> bytes:
    """Several named byte strings as one artifact (an object file and its IR, a cubin and its PTX).

    >>> unpack_sections(pack_sections({"obj": b"\\x7fELF", "ll": "define"}))
    {'obj': b'\\x7fELF', 'll': b'define'}
    """
    parts = {k: v.encode("utf-8") if isinstance(v, str) else bytes(v) for k, v in sections.items()}
    header = json.dumps({k: len(v) for k, v in parts.items()}).encode("utf-8")
    return _SECTIONS_MAGIC + header + b"\n" + b"".join(parts.values())


def unpack_sections(data: bytes, where: str = "artifact") -> dict[str, bytes]:
    """The sections :func:`pack_sections` packed; a SerializationError when ``data`` is not such a pack."""
    data = bytes(data)
    if not data.startswith(_SECTIONS_MAGIC):
        raise SerializationError(f"{where}: not a Loom sections artifact")
    line, sep, rest = data[len(_SECTIONS_MAGIC):].partition(b"\n")
    try:
        sizes = json.loads(line.decode("utf-8")) if sep else None
    except (ValueError, UnicodeDecodeError):
        sizes = None
    if not isinstance(sizes, dict) or not all(isinstance(n, int) and n >= 0 for n in sizes.values()) \
            or sum(sizes.values()) != len(rest):
        raise SerializationError(f"{where}: the sections header is corrupt or the data is truncated")
    out, at = {}, 0
    for name, size in sizes.items():
        out[str(name)] = rest[at:at + size]
        at += size
    return out


def signature_of(func: PrimFunc) -> PrimFunc:
    """``func`` without its body: params, buffer_map and attrs, all the runtime checks need.

    The attrs always hold ``loom.written_params`` (the parameters the body may
    write, :func:`loom.transform.make_api.declared_writes`), computed from the
    body before it is dropped, so exported and cached signatures keep it.
    """
    from ..transform.make_api import WRITTEN_PARAMS_ATTR, declared_writes  # lazy: the passes import much of loom

    attrs = {**func.attrs, WRITTEN_PARAMS_ATTR: declared_writes(func)}
    return PrimFunc(func.params, no_op(), func.ret_type, func.buffer_map, attrs)


@attrs.frozen
class ModuleInfo:
    """What the core tells ``load`` (and records in exported libraries) about a compiled module.

    :param kind: the target kind (``"llvm"``).
    :param target: the canonical target string.
    :param entry: the function ``module(*args)`` calls.
    :param functions: every function's signature (:func:`signature_of`), by name.
    :param imports: functions the module calls that other modules define (the runtime links them).
    :param sources: the rendered sources by format, for ``get_source``.
    """

    kind: str
    target: str
    entry: str
    functions: Mapping[str, PrimFunc] = attrs.field(factory=dict)
    imports: tuple[str, ...] = ()
    sources: Mapping[str, str] = attrs.field(factory=dict)

    def to_json(self) -> str:
        from ..ir.serialize import save_json

        return json.dumps({"kind": self.kind, "target": self.target, "entry": self.entry,
                           "functions": save_json(IRModule(dict(self.functions))), "imports": list(self.imports),
                           "sources": dict(self.sources)}, sort_keys=True)

    @classmethod
    def from_json(cls, text: str | bytes, where: str = "module metadata") -> ModuleInfo:
        """Read :meth:`to_json`'s text; a SerializationError naming ``where`` when it is malformed."""
        from ..ir.serialize import load_json

        try:
            doc = json.loads(text)
        except (ValueError, UnicodeDecodeError) as err:
            raise SerializationError(f"{where}: not valid JSON ({err})") from None
        types = {"kind": str, "target": str, "entry": str, "functions": str, "imports": list, "sources": dict}
        if not isinstance(doc, dict) or not all(isinstance(doc.get(k), t) for k, t in types.items()):
            raise SerializationError(f"{where}: expected an object with {sorted(types)}")
        mod = load_json(doc["functions"])
        if not isinstance(mod, IRModule) or not all(isinstance(f, PrimFunc) for f in mod.functions.values()):
            raise SerializationError(f"{where}: the function signatures are not an IRModule of PrimFuncs")
        if not all(isinstance(x, str) for x in doc["imports"]) or \
                not all(isinstance(k, str) and isinstance(v, str) for k, v in doc["sources"].items()):
            raise SerializationError(f"{where}: imports and sources must hold strings")
        funcs = {k: f for k, f in mod.functions.items() if isinstance(f, PrimFunc)}  # all of them, checked above
        return cls(doc["kind"], doc["target"], doc["entry"], funcs, tuple(doc["imports"]), dict(doc["sources"]))


class Backend:
    """Base class of the backend a plugin returns from ``loom_backend(target_kind)``.

    Set :attr:`kind` and :attr:`version`, implement the four stages, and adjust the
    class attributes that tell the lowering pipeline what the backend needs.
    """

    #: The target kind this backend builds.
    kind: ClassVar[str] = ""
    #: Part of every cache key: change it whenever the generated code or artifact format changes.
    version: ClassVar[str] = "0"
    #: The file suffix of cached artifacts (``".so"``, ``".cubin"``).
    artifact_suffix: ClassVar[str] = ""
    #: False when compiling is as cheap as loading (nothing to gain from the disk cache).
    cacheable: ClassVar[bool] = True
    #: How thread-bound code runs (see :data:`THREAD_SEMANTICS`).
    thread_semantics: ClassVar[str] = "serial"
    #: Whether LowerIntrin may turn floordiv/floormod of provably non-negative operands into
    #: truncating division (the same values there, and cheaper where division truncates).
    rewrite_floor_division: ClassVar[bool] = True

    def options(self, target: Target) -> BackendOptions:
        """The frozen options of ``target`` (default: none)."""
        return BackendOptions()

    def compiler_identity(self, options: BackendOptions) -> str:
        """Who compiles: tool versions and whatever else of the host changes the artifact."""
        return ""

    def render(self, mod: IRModule, options: BackendOptions) -> Mapping[str, str]:
        """Source text of ``mod`` by format name (at least one entry)."""
        raise NotImplementedError(f"{type(self).__name__} must implement render")

    def compile(self, sources: Mapping[str, str], options: BackendOptions) -> bytes:
        """The compiled artifact of ``sources``."""
        raise NotImplementedError(f"{type(self).__name__} must implement compile")

    def load(self, data: bytes, info: ModuleInfo) -> Module:
        """A runtime Module from an artifact ``compile`` made (``data`` may be an :class:`Artifact`)."""
        raise NotImplementedError(f"{type(self).__name__} must implement load")

    def __repr__(self) -> str:
        return f"<{type(self).__name__} for target kind {self.kind!r} (version {self.version})>"
