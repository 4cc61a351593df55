# Every target sets up .venv on first use, so on a fresh machine `make demo` and
# `make test` are the only commands a user types.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: demo test lint typecheck bench clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[test]'
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/cockpit demo

lint: typecheck
	$(BIN)/ruff check cockpit widgets themes tests bench tools
	$(BIN)/ruff format --check cockpit widgets themes tests bench tools

# mypy alone would check widgets/ and themes/ as top-level packages: see tools/typecheck.py.
typecheck: $(STAMP)
	$(BIN)/python tools/typecheck.py

test: lint
	$(BIN)/python -m pytest -q

bench: $(STAMP)
	$(BIN)/python -m bench

clean:
	rm -rf $(VENV) build dist *.egg-info .pytest_cache .mypy_cache .ruff_cache
