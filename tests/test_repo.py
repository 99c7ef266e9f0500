"""Repository hygiene: file sizes and packaging stay honest."""

import pathlib

import pytest

tomllib = pytest.importorskip("tomllib", reason="the repository checks read pyproject.toml with Python 3.11's tomllib")

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


# --------------------------------------------------------------------------- distributions

CORE_DIST = "loom-compiler"  # shared/DESIGN.md §1: PyPI's "loom" is another project
BACKEND_DIRS = sorted(p.parent for p in (ROOT / "backends").glob("*/pyproject.toml"))


def _project(folder: pathlib.Path) -> dict:
    return tomllib.loads((folder / "pyproject.toml").read_text())


def _core_version() -> str:
    [line] = [ln for ln in (ROOT / "core" / "__init__.py").read_text().splitlines() if ln.startswith("__version__")]
    return line.split("=", 1)[1].strip().strip("\"'")


def test_core_distribution_is_loom_compiler_at_the_package_version():
    project = _project(ROOT)["project"]
    assert project["name"] == CORE_DIST
    assert project["version"] == _core_version(), "pyproject.toml and loom.__version__ disagree"


def test_each_backend_pins_the_core_to_its_own_release():
    assert {p.name for p in BACKEND_DIRS} >= {"llvm", "c_source", "cuda"}
    for folder in BACKEND_DIRS:
        project = _project(folder)["project"]
        pins = [d for d in project["dependencies"] if d.replace(" ", "").startswith(CORE_DIST)]
        assert pins == [f"{CORE_DIST}=={project['version']}"], f"{folder.name}: {project['dependencies']}"
        assert project["version"] == _core_version(), f"{folder.name} is not released with the core"
        assert not any(d.split("[")[0].split("=")[0].strip() == "loom" for d in project["dependencies"])


def test_every_backend_package_is_declared():
    for folder in BACKEND_DIRS:
        declared = set(_project(folder)["tool"]["setuptools"]["packages"])
        found = {".".join(p.parent.relative_to(folder).parts) for p in folder.rglob("__init__.py")
                 if "build" not in p.relative_to(folder).parts}
        assert found <= declared, f"{folder.name}: add to [tool.setuptools] packages: {sorted(found - declared)}"


def test_type_markers_are_package_data():
    # setuptools puts only .py files into a wheel unless told otherwise (`make smoke` checks the wheel).
    for folder in [ROOT, *BACKEND_DIRS]:
        data = _project(folder)["tool"]["setuptools"].get("package-data", {})
        assert "py.typed" in data.get("*", []), f"{folder.name}: declare py.typed as package data"


def test_no_code_looks_up_the_old_distribution_name():
    stale = [str(p.relative_to(ROOT)) for p in _sources()
             if any(f'{call}("loom")' in p.read_text() for call in ("version", "distribution", "metadata"))]
    assert not stale, f"the core distribution is {CORE_DIST!r}: {stale}"


def test_make_test_runs_the_install_smoke_test():
    makefile = (ROOT / "Makefile").read_text()
    recipe = makefile.split("\ntest:", 1)[1].split("\n\n", 1)[0]
    assert "smoke" in recipe and (ROOT / "tests" / "smoke_install.py").exists()


def test_every_package_has_a_type_marker():
    # PEP 561: type checkers read an installed package's annotations only beside a py.typed file.
    folders = [ROOT / "core", *(p.parent for folder in BACKEND_DIRS for p in folder.glob("*/__init__.py")
                                if "build" not in p.relative_to(folder).parts)]
    missing = [str(f.relative_to(ROOT)) for f in folders if not (f / "py.typed").is_file()]
    assert not missing, f"add py.typed to {missing}"


def test_make_test_runs_the_type_check():
    makefile = (ROOT / "Makefile").read_text()
    recipe = makefile.split("\ntest:", 1)[1].split("\n\n", 1)[0]
    assert "typecheck" in recipe and (ROOT / "tools" / "typecheck.py").exists()
    assert "\ntypecheck:" in makefile

