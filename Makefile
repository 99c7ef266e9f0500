# `make demo` and `make test` each set up everything from a fresh clone:
# a virtualenv in .venv with the core (distribution loom-compiler) and every backend installed in
# editable mode.

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.loom-installed
BACKENDS := backends/llvm backends/c_source backends/cuda
PYTEST_ARGS ?= -n 2

.PHONY: setup demo test test-fast smoke typecheck clean bench bench-env

$(STAMP): pyproject.toml setup.py core/runtime/_fastcall.c core/driver/_tree_state.c $(addsuffix /pyproject.toml,$(BACKENDS))
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip "setuptools>=77" wheel
	@# The core was once distributed as "loom": drop that install from an older .venv.
	if $(BIN)/python -m pip show --quiet loom >/dev/null 2>&1; then $(BIN)/python -m pip uninstall --quiet -y loom; fi
	$(BIN)/python -m pip install --quiet -e ".[test]" $(addprefix -e ,$(BACKENDS))
	touch $(STAMP)

setup: $(STAMP)

demo: $(STAMP)
	$(BIN)/python examples/demo.py

# The type check, the unit tests, then the backend conformance suite shipped in the package, for every
# shipped kind (the suite's pytest plugin is registered through the pytest11 entry point), then the
# install smoke test.
test: $(STAMP)
	$(MAKE) --no-print-directory typecheck
	$(BIN)/python -m pytest $(PYTEST_ARGS) tests
	$(BIN)/python -m pytest $(PYTEST_ARGS) --pyargs loom.testing.conformance --loom-kind=interp,llvm,c,ext_dev
	$(MAKE) --no-print-directory smoke

# A regular (non-editable) `pip install . backends/llvm backends/c_source` into a fresh virtualenv in a
# temporary folder, checked from outside the source tree (tests/smoke_install.py; about 15 s).
smoke:
	$(PYTHON) tests/smoke_install.py

# mypy over the packages (core/ staged as `loom`, see tools/typecheck.py) and the typed user code in
# tests/typing; configured in pyproject.toml [tool.mypy]; about 5 s with its cache in build/.
typecheck: $(STAMP)
	$(BIN)/python tools/typecheck.py

# One process, stop at the first failure: handy while developing.
test-fast: $(STAMP)
	$(BIN)/python -m pytest -x -q tests

# Benchmarks (not tests): numpy, Loom llvm/c and Apache TVM in one run; see docs/benchmarks.md.
# TVM lives in its own environment, bench/.venv-tvm, made by `make bench-env` (about 400 MB).
TVM_VENV := bench/.venv-tvm
TVM_STAMP := $(TVM_VENV)/.tvm-installed
BENCH_ARGS ?=

$(TVM_STAMP):
	$(PYTHON) -m venv $(TVM_VENV)
	$(TVM_VENV)/bin/python -m pip install --quiet --upgrade pip
	$(TVM_VENV)/bin/python -m pip install --quiet "apache-tvm==0.27.*" numpy
	touch $(TVM_STAMP)

bench-env: $(TVM_STAMP)

bench: $(STAMP)
	$(BIN)/python bench/run.py $(BENCH_ARGS)

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis
