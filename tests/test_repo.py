"""Repository hygiene: file sizes and packaging stay honest."""

import pathlib
import tomllib

ROOT = pathlib.Path(__file__).resolve().parents[1]
SOURCE_DIRS = ["core", "plugins", "backends"]
MAX_LINES = 500


def _sources():
    for d in SOURCE_DIRS:
        yield from (ROOT / d).rglob("*.py")


def test_source_files_stay_small():
    big = {str(p.relative_to(ROOT)): n for p in _sources() if (n := len(p.read_text().splitlines())) > MAX_LINES}
    assert not big, f"split these files by family (limit {MAX_LINES} lines): {big}"


def test_every_core_package_is_declared():
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    declared = set(config["tool"]["setuptools"]["packages"])
    found = {"loom"} | {
        "loom." + ".".join(p.parent.relative_to(ROOT / "core").parts)
        for p in (ROOT / "core").rglob("__init__.py") if p.parent != ROOT / "core"
    } | {"loom.plugins"}
    assert found <= declared, f"add to [tool.setuptools] packages: {sorted(found - declared)}"


def test_readme_starts_with_the_two_commands():
    head = "\n".join((ROOT / "README.md").read_text().splitlines()[:40])
    assert "make demo" in head and "make test" in head
