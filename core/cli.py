"""The ``loom`` command line: what is installed.

``loom plugins`` lists every plugin with its version, distribution, status and
contributions, and the broken ones with their errors; ``loom targets`` lists the
target kinds with their attribute schemas.  ``--json`` gives the same data
machine-readably.  Both exit 0, even when a plugin is broken (that is what
they are for); 1 means the command line itself was wrong.  ``loom cache info |
prune | clear`` manages the compile cache (:mod:`loom.cli_cache`); ``loom info`` shows
versions, CPU, compilers, GPUs, the cache and ``LOOM_*`` settings (:mod:`loom.cli_info`)::

    $ loom plugins
    $ python -m loom targets --json
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import warnings
from collections.abc import Sequence
from typing import Any, NoReturn, TextIO

from .errors import LoomError

__all__ = ["main"]


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        self.exit(1, f"{self.prog}: error: {message}\n")


def _parser() -> argparse.ArgumentParser:
    from . import __version__

    parser = _Parser(prog="loom", description="Loom tensor compiler: inspect the installation.")
    parser.add_argument("--version", action="version", version=f"loom {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    for name, text in (("plugins", "list plugins, their versions, contributions and errors"),
                       ("targets", "list target kinds and their attribute schemas")):
        cmd = sub.add_parser(name, help=text, description=text)
        cmd.add_argument("--json", action="store_true", help="print JSON instead of a table")
    from . import cli_cache

    cli_cache.add_parser(sub)
    from . import cli_info

    cli_info.add_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``loom`` command; return the exit status."""
    parser = _parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help(sys.stderr)
        return 1
    if args.command == "cache":
        from . import cli_cache

        return cli_cache.run(args)
    if args.command == "info":
        from . import cli_info

        return cli_info.run(args)
    from .plugins import PluginLoadWarning

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PluginLoadWarning)  # the report itself lists them
        data = _plugins_data() if args.command == "plugins" else _targets_data()
    try:
        if args.json:
            json.dump(data, sys.stdout, indent=2, default=_jsonable)
            sys.stdout.write("\n")
        elif args.command == "plugins":
            _print_plugins(data, sys.stdout)
        else:
            _print_targets(data, sys.stdout)
        sys.stdout.flush()
    except BrokenPipeError:
        # The reader left (``loom targets | head``); silence the flush at exit too.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    return 0


def _jsonable(value: Any) -> Any:
    if isinstance(value, (tuple, set, frozenset)):
        return list(value)
    return repr(value)


# --------------------------------------------------------------------------- data


def _kinds() -> tuple[dict[str, tuple[Any, str | None]], list[str]]:
    """``{name: (TargetKind, plugin or None)}`` as the target registry sees them, plus problems."""
    from . import plugins, target

    try:
        owners = {name: who for name, (_, who) in plugins.collect_target_kinds().items()}
        return {name: (target.get_kind(name), owners.get(name)) for name in target.list_kinds()}, []
    except LoomError as err:  # the registry itself broke (a duplicate kind only breaks its plugin)
        return {}, [str(err)]


def _device_name(device_type: int) -> str:
    from .target import device_type_name

    return device_type_name(device_type)


def _plugins_data() -> dict[str, Any]:
    from . import plugins

    infos = plugins.list_plugins()
    kinds, problems = _kinds()
    rows = []
    for info in infos:
        row = info.to_dict()
        row["target_kinds"] = [
            {"name": k, "device_type": kinds[k][0].device_type if k in kinds else None,
             "device": _device_name(kinds[k][0].device_type) if k in kinds else None}
            for k in info.target_kinds]
        rows.append(row)
    return {"plugins": rows, "problems": problems}


def _targets_data() -> dict[str, Any]:
    from . import plugins

    kinds, problems = _kinds()
    # The kinds of broken plugins are missing; say why.
    problems += [f"plugin {p.name!r} is broken, its target kinds are missing: {p.error}"
                 for p in plugins.broken_plugins()]
    rows = []
    for name, (kind, plugin) in sorted(kinds.items()):
        computed: dict[str, Any] = {}
        if kind.default_attrs is not None:
            try:
                computed = dict(kind.default_attrs({}) or {})
            except Exception as err:  # noqa: BLE001 - show a backend's broken default, keep listing
                problems.append(f"target kind {name!r}: computing default attributes failed: "
                                f"{type(err).__name__}: {err}")
        attrs = []
        for attr, spec in kind.schema.items():
            is_computed = attr in computed
            attrs.append({"name": attr, "type": spec.type_name,
                          "default": computed[attr] if is_computed else spec.default,
                          "computed": is_computed, "doc": spec.doc})
        rows.append({"name": name, "device_type": kind.device_type,
                     "device": _device_name(kind.device_type), "keys": list(kind.default_keys),
                     "plugin": plugin, "doc": kind.doc, "attrs": attrs})
    return {"target_kinds": rows, "problems": problems}


# --------------------------------------------------------------------------- text


def _table(rows: list[list[str]], out: TextIO) -> None:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]) - 1)]
    for r in rows:
        cells = [c.ljust(w) for c, w in zip(r, widths)] + [r[-1]]
        out.write("  ".join(cells).rstrip() + "\n")


def _print_plugins(data: dict[str, Any], out: TextIO) -> None:
    rows = [["NAME", "VERSION", "DISTRIBUTION", "STATUS", "CONTRIBUTES"]]
    broken = []
    for p in data["plugins"]:
        if p["status"] == "failed":
            broken.append(p)
        parts = []
        if p["target_kinds"]:
            parts.append("target kinds: " + ", ".join(
                f"{k['name']} ({k['device'] or '?'})" for k in p["target_kinds"]))
        other = [h for h in p["hooks"] if h != "loom_target_kinds"]
        if other:
            parts.append("hooks: " + ", ".join(other))
        rows.append([p["name"], p["version"] or "-", p["dist"] or "-", p["status"],
                     "; ".join(parts) or "-"])
    _table(rows, out)
    if broken:
        out.write("\nBroken plugins (skipped; the others work):\n")
        for p in broken:
            dist = " ".join(filter(None, (p["dist"], p["version"])))
            origin = f" (distribution {dist})" if dist else ""
            out.write(f"  {p['name']}{origin}: {p['error']}\n")
    _print_problems(data["problems"], out)


def _print_targets(data: dict[str, Any], out: TextIO) -> None:
    for i, k in enumerate(data["target_kinds"]):
        if i:
            out.write("\n")
        plugin = k["plugin"] or "registered at run time"
        out.write(f"{k['name']}  device={k['device']}({k['device_type']})  "
                  f"keys={','.join(k['keys']) or '-'}  plugin={plugin}\n")
        if k["doc"]:
            out.write(f"  {k['doc']}\n")
        rows = [["  ATTRIBUTE", "TYPE", "DEFAULT"]]
        for a in k["attrs"]:
            rows.append([f"  {a['name']}", a["type"], _format_default(a)])
        if len(rows) > 1:
            _table(rows, out)
    if not data["target_kinds"]:
        out.write("no target kinds installed\n")
    _print_problems(data["problems"], out)


def _format_default(attr: dict[str, Any]) -> str:
    value = attr["default"]
    if value is None:
        return "-"
    text = ",".join(value) if isinstance(value, (list, tuple)) else str(value)
    if len(text) > 60:
        text = text[:57] + "..."
    return f"{text} (computed)" if attr["computed"] else text


def _print_problems(problems: list[str], out: TextIO) -> None:
    if problems:
        out.write("\nProblems:\n")
        for msg in problems:
            out.write(f"  {msg}\n")
