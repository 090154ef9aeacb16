# memory-pipeline — every target sets up its own virtual environment first.
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
DATA   ?= data
PYTEST_ARGS ?=

export HYBRID_RAG_DB_PATH    ?= $(DATA)/memory.db
export HYBRID_RAG_INDEX_PATH ?= $(DATA)/indices
export HYBRID_RAG_ARCHIVE_PATH ?= $(DATA)/archive

.PHONY: install run test lint fast-test bench clean

$(STAMP): pyproject.toml
	test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

install: $(STAMP)

run: install  ## ingest the bundled sample corpus and answer a sample query
	mkdir -p $(DATA)
	$(VENV)/bin/memory-pipeline demo

lint: install
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy

test: lint  ## lint, type-check and run every test (slow ones included)
	$(VENV)/bin/pytest $(PYTEST_ARGS)

fast-test: install
	$(VENV)/bin/pytest -m "not slow" $(PYTEST_ARGS)

bench: install  ## index and query costs at 10k and 100k chunks (takes minutes)
	$(PY) bench/bench_core.py

clean:
	rm -rf $(DATA) .pytest_cache .mypy_cache .ruff_cache
