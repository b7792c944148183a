# Both targets build their own virtualenv, so a fresh machine needs nothing but python3.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: run test lint typecheck check clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $(STAMP)

## Start the embedded stack, run the demo agent task to completion, show what happened, stop.
run: $(STAMP)
	$(BIN)/agentctl demo

## Lint, typecheck and run the whole test suite against real Temporal, PostgreSQL and S3.
test: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/mypy
	$(BIN)/pytest -q

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck: $(STAMP)
	$(BIN)/mypy

clean:
	rm -rf $(VENV) .devstack .pytest_cache .mypy_cache
