PY ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: run test test-all bench lint snapshots clean

$(STAMP): pyproject.toml constraints.txt
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -c constraints.txt -e '.[dev]'
	touch $(STAMP)

run: $(STAMP)
	$(BIN)/befair

test: $(STAMP) lint
	$(BIN)/python -m pytest -q

test-all: $(STAMP)
	$(BIN)/python -m pytest -q -m 'not bench'

bench: $(STAMP)
	$(BIN)/python -m tests.bench.run_all

lint: $(STAMP)
	$(BIN)/lint-imports
	$(BIN)/ruff check .
	$(BIN)/mypy

snapshots: $(STAMP)
	$(BIN)/python -m pytest -q tests/snapshot --snapshot-update

clean:
	rm -rf $(VENV) build *.egg-info
