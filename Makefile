# `make demo` and `make test` each set up everything from a fresh clone:
# a virtualenv in .venv with the core and every backend installed in editable mode.

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.loom-installed
BACKENDS := backends/llvm backends/c_source backends/cuda
PYTEST_ARGS ?= -n 2

.PHONY: setup demo test test-fast clean bench bench-env

$(STAMP): pyproject.toml $(addsuffix /pyproject.toml,$(BACKENDS))
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip "setuptools>=77" wheel
	$(BIN)/python -m pip install --quiet -e ".[test]" $(addprefix -e ,$(BACKENDS))
	touch $(STAMP)

setup: $(STAMP)

demo: $(STAMP)
	$(BIN)/python examples/demo.py

# The unit tests, then the backend conformance suite shipped in the package, for every shipped kind
# (the suite's pytest plugin is registered through the pytest11 entry point).
test: $(STAMP)
	$(BIN)/python -m pytest $(PYTEST_ARGS) tests
	$(BIN)/python -m pytest $(PYTEST_ARGS) --pyargs loom.testing.conformance --loom-kind=interp,llvm,c,ext_dev

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
