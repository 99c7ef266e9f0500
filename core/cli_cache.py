"""``loom cache``: inspect and trim the on-disk compile cache (:mod:`loom.runtime.disk_cache`).

::

    $ loom cache info                  # the folder, the size cap, entries and bytes per namespace
    $ loom cache prune --max-size 500M # evict least recently used entries down to 500 MiB
    $ loom cache prune                 # ... down to LOOM_CACHE_MAX_SIZE (default 2G)
    $ loom cache clear                 # delete every entry

``--json`` prints the same data machine-readably.  The exit status is 0, and 1
when the command line is wrong or the cache cannot be worked on (a malformed
``LOOM_CACHE_MAX_SIZE``, a lock held by a build that does not finish...), with
the reason on stderr.  Entries are deleted under the lock each build takes, so a
build running meanwhile is never handed half an entry.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any, TextIO

from .errors import LoomError

__all__ = ["add_parser", "run"]

_ACTIONS = {
    "info": "show the cache folder, its size cap, and the entries and bytes of each namespace",
    "prune": "evict the least recently used entries until the cache fits a size",
    "clear": "delete every entry of the cache",
}


def _size(text: str) -> int:
    from .envvars import parse_size

    try:
        return parse_size(text)
    except LoomError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


def add_parser(sub: Any) -> None:
    """Add ``cache`` and its actions to the ``loom`` command's subparsers ``sub``."""
    text = "inspect, prune or clear the on-disk compile cache"
    cmd = sub.add_parser("cache", help=text, description=text)
    actions = cmd.add_subparsers(dest="cache_action", metavar="ACTION")
    for name, help_text in _ACTIONS.items():
        action = actions.add_parser(name, help=help_text, description=help_text)
        action.add_argument("--json", action="store_true", help="print JSON instead of text")
        if name == "prune":
            action.add_argument("--max-size", type=_size, metavar="SIZE",
                                help="the size to prune to, such as 500M or 2G (default: LOOM_CACHE_MAX_SIZE)")
    cmd.set_defaults(cache_parser=cmd)


def run(args: argparse.Namespace, out: TextIO | None = None, err: TextIO | None = None) -> int:
    """Run ``loom cache <action>`` for parsed ``args``; the exit status."""
    out = out or sys.stdout
    err = err or sys.stderr
    if args.cache_action is None:
        args.cache_parser.print_help(err)
        return 1
    try:
        data = {"info": _info, "prune": _prune, "clear": _clear}[args.cache_action](args)
    except LoomError as error:
        err.write(f"loom cache {args.cache_action}: error: {error}\n")
        return 1
    if args.json:
        json.dump(data, out, indent=2)
        out.write("\n")
    else:
        _print(args.cache_action, data, out)
    return 0


def _state(root: str) -> dict[str, Any]:
    from .runtime.disk_cache import cache_usage

    usage = cache_usage(root)
    return {"folder": root, "entries": sum(n for n, _ in usage.values()), "size": sum(b for _, b in usage.values()),
            "namespaces": {ns: {"entries": n, "size": b} for ns, (n, b) in sorted(usage.items())}}


def _info(args: argparse.Namespace) -> dict[str, Any]:
    from .runtime.disk_cache import cache_enabled, cache_max_size, cache_root, folder_problem

    root = cache_root()
    problems = []
    try:
        cap: int | None = cache_max_size()
    except LoomError as error:  # info still shows the rest
        cap = None
        problems.append(str(error))
    problem = folder_problem(root)
    if problem is not None:
        problems.append(problem)
    return {**_state(root), "enabled": cache_enabled(), "max_size": cap, "problems": problems}


def _prune(args: argparse.Namespace) -> dict[str, Any]:
    from .runtime.disk_cache import cache_max_size, cache_root, prune

    root = cache_root()
    cap = args.max_size if args.max_size is not None else cache_max_size()
    removed, freed = prune(cap, root)
    return {**_state(root), "max_size": cap, "removed": removed, "freed": freed}


def _clear(args: argparse.Namespace) -> dict[str, Any]:
    from .runtime.disk_cache import cache_root, clear_cache

    root = cache_root()
    removed, freed = clear_cache(root)
    return {**_state(root), "removed": removed, "freed": freed}


def human_size(n: int) -> str:
    """``n`` bytes in words: ``"512 B"``, ``"1.5 KiB"``, ``"2.0 GiB"``.

    >>> human_size(512), human_size(1536), human_size(2 << 30)
    ('512 B', '1.5 KiB', '2.0 GiB')
    """
    size, unit = float(n), "B"
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if size < 1024 or unit == "TiB":
            break
        size /= 1024
    return f"{n} B" if unit == "B" else f"{size:.1f} {unit}"


def _print(action: str, data: dict[str, Any], out: TextIO) -> None:
    entries = f"{data['entries']} entr{'y' if data['entries'] == 1 else 'ies'}, {human_size(data['size'])}"
    if action != "info":
        out.write(f"removed {data['removed']} entr{'y' if data['removed'] == 1 else 'ies'} "
                  f"({human_size(data['freed'])}) from {data['folder']}; left: {entries}\n")
        return
    cap = "unknown" if data["max_size"] is None else human_size(data["max_size"])
    out.write(f"folder    {data['folder']}\n"
              f"enabled   {'yes' if data['enabled'] else 'no (LOOM_CACHE)'}\n"
              f"max size  {cap} (LOOM_CACHE_MAX_SIZE)\n"
              f"entries   {entries}\n")
    if data["namespaces"]:
        rows = [("NAMESPACE", "ENTRIES", "SIZE")] + [(ns, str(v["entries"]), human_size(v["size"]))
                                                    for ns, v in data["namespaces"].items()]
        widths = [max(len(r[i]) for r in rows) for i in range(3)]
        out.write("\n")
        for r in rows:
            out.write(f"{r[0].ljust(widths[0])}  {r[1].rjust(widths[1])}  {r[2]}\n")
    if data["problems"]:
        out.write("\nProblems:\n" + "".join(f"  {p}\n" for p in data["problems"]))
