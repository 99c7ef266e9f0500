"""The dynamic symbols of an ELF shared library, read from its bytes without loading it.

Loading a library (``dlopen``) maps and runs it; what Loom must know *before*
that (the module metadata, whether a symbol the metadata names is a function or
a variable, and how big) is in the library's dynamic symbol table, which
:func:`dynamic_symbols` reads with every offset checked against the data, so a
damaged file is an :class:`ElfError` and never a crash.  32- and 64-bit, little-
and big-endian files are read alike.
"""

from __future__ import annotations

import struct
from typing import NamedTuple, Sequence

from ..errors import SerializationError

__all__ = ["ElfError", "ElfSymbol", "dynamic_symbols", "symbol_bytes", "ELF_MAGIC", "FUNCTION", "OBJECT"]

ELF_MAGIC = b"\x7fELF"
_SHT_DYNSYM = 11
_SHT_NOBITS = 8
_SHN_LORESERVE = 0xFF00
#: Symbol kinds (``STT_*``) that matter to Loom.
OBJECT, FUNCTION = "object", "function"
_KINDS = {1: OBJECT, 2: FUNCTION}


class ElfError(SerializationError):
    """The bytes are not a well-formed ELF shared library."""


class ElfSymbol(NamedTuple):
    """One defined dynamic symbol: its kind (:data:`FUNCTION`, :data:`OBJECT` or ``"other"``),
    its size and where its bytes are in the file (None when they are not, e.g. zeroed data)."""

    kind: str
    size: int
    offset: int | None


def _layout(data: bytes) -> tuple[str, bool]:
    if len(data) < 16 or data[:4] != ELF_MAGIC:
        raise ElfError("not an ELF file")
    cls, order = data[4], data[5]
    if cls not in (1, 2) or order not in (1, 2):
        raise ElfError(f"unknown ELF class {cls} or byte order {order}")
    return ("<" if order == 1 else ">"), cls == 2


def dynamic_symbols(data: bytes) -> dict[str, ElfSymbol]:
    """The *defined* symbols of the dynamic symbol table (what ``dlsym`` finds in this file), by name.

    :raises ElfError: when the header, section table or symbol table is malformed or out of bounds.
    """
    end, wide = _layout(data)
    try:
        if wide:
            shoff, = struct.unpack_from(end + "Q", data, 0x28)
            shentsize, shnum = struct.unpack_from(end + "HH", data, 0x3A)
            sh_fmt, sym_fmt = end + "IIQQQQIIQQ", end + "IBBHQQ"
        else:
            shoff, = struct.unpack_from(end + "I", data, 0x20)
            shentsize, shnum = struct.unpack_from(end + "HH", data, 0x2E)
            sh_fmt, sym_fmt = end + "IIIIIIIIII", end + "IIIBBH"
        if shnum == 0 or shentsize < struct.calcsize(sh_fmt) or shoff + shnum * shentsize > len(data):
            raise ElfError("the section table is missing or out of bounds")
        # (type, addr, offset, size, link, entsize) of each section
        sections = []
        for k in range(shnum):
            _, typ, _, addr, off, size, link, _, _, entsize = struct.unpack_from(sh_fmt, data, shoff + k * shentsize)
            sections.append((typ, addr, off, size, link, entsize))
        dynsym = [s for s in sections if s[0] == _SHT_DYNSYM]
        if len(dynsym) != 1:
            raise ElfError("no dynamic symbol table (not a shared library?)")
        _, _, off, size, link, entsize = dynsym[0]
        if link >= shnum or entsize < struct.calcsize(sym_fmt) or off + size > len(data):
            raise ElfError("the dynamic symbol table is out of bounds")
        _, _, str_off, str_size, _, _ = sections[link]
        if str_off + str_size > len(data):
            raise ElfError("the dynamic string table is out of bounds")
        strings = data[str_off:str_off + str_size]
        out: dict[str, ElfSymbol] = {}
        for k in range(size // entsize):
            fields = struct.unpack_from(sym_fmt, data, off + k * entsize)
            if wide:
                name_at, info, _, shndx, value, sym_size = fields
            else:
                name_at, value, sym_size, info, _, shndx = fields
            if shndx == 0 or name_at >= len(strings):  # undefined (imported), or a broken name
                continue
            stop = strings.find(b"\0", name_at)
            name = strings[name_at:stop if stop >= 0 else len(strings)].decode("utf-8", "replace")
            out[name] = ElfSymbol(_KINDS.get(info & 0xF, "other"), sym_size,
                                  _file_offset(sections, shndx, value, sym_size))
        return out
    except struct.error as err:
        raise ElfError(f"truncated ELF data ({err})") from None


def _file_offset(sections: Sequence[tuple[int, ...]], shndx: int, value: int, size: int) -> int | None:
    if shndx >= _SHN_LORESERVE or shndx >= len(sections):
        return None
    typ, addr, off, sec_size, _, _ = sections[shndx]
    if typ == _SHT_NOBITS or not addr <= value <= value + size <= addr + sec_size:
        return None
    return off + (value - addr)


def symbol_bytes(data: bytes, symbol: ElfSymbol) -> bytes:
    """The bytes of ``symbol`` in the file (e.g. a constant string's).

    :raises ElfError: when they are not in the file or out of bounds.
    """
    if symbol.offset is None or symbol.offset + symbol.size > len(data):
        raise ElfError("the symbol's bytes are not in the file")
    return data[symbol.offset:symbol.offset + symbol.size]
