# memory-pipeline — every target sets up its own virtual environment first.
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
DATA   ?= data
PYTEST_ARGS ?=

export HYBRID_RAG_DB_PATH    ?= $(DATA)/memory.db
export HYBRID_RAG_INDEX_PATH ?= $(DATA)/indices
export HYBRID_RAG_ARCHIVE_PATH ?= $(DATA)/archive

.PHONY: install run demo test lint fast-test bench clean

$(STAMP): pyproject.toml
	test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

install: $(STAMP)

run: install  ## start Dagster on the demo corpus: sensors ingest and index it, no clicks (PORT=3000)
	mkdir -p $(DATA)/sources $(DATA)/dagster_home
	$(PY) -m memory_pipeline.pipeline.instance $(DATA)/dagster_home
	cp -R -n demo/corpus/. $(DATA)/sources/
	test -f $(DATA)/sources.yaml || cp demo/sources.yaml $(DATA)/sources.yaml
	@echo "Dagster UI: http://127.0.0.1:$(or $(PORT),3000)  (sources: $(DATA)/sources.yaml; Ctrl-C stops)"
	DAGSTER_HOME=$(abspath $(DATA))/dagster_home \
	HYBRID_RAG_DB_PATH=$(abspath $(DATA))/memory.db \
	HYBRID_RAG_INDEX_PATH=$(abspath $(DATA))/indices \
	HYBRID_RAG_ARCHIVE_PATH=$(abspath $(DATA))/archive \
	MEMORY_PIPELINE_SOURCES=$(abspath $(DATA))/sources.yaml \
	MEMORY_PIPELINE_GOLDEN=$(abspath demo/golden.yaml) \
	MEMORY_PIPELINE_EVAL_DIR=$(abspath $(DATA))/eval \
	exec $(VENV)/bin/dagster dev -w workspace.yaml -h 127.0.0.1 -p $(or $(PORT),3000)

demo: install  ## no server: ingest the bundled sample corpus and answer two sample queries
	mkdir -p $(DATA)
	$(VENV)/bin/memory-pipeline demo

lint: install
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy
	$(VENV)/bin/dagster definitions validate -w workspace.yaml

test: lint  ## lint, type-check and run every test (slow ones included)
	$(VENV)/bin/pytest $(PYTEST_ARGS)

fast-test: install
	$(VENV)/bin/pytest -m "not slow" $(PYTEST_ARGS)

bench: install  ## index, query, forgetting costs at 10k and 100k chunks (takes minutes)
	$(PY) bench/bench_core.py
	$(PY) bench/bench_forgetting.py
	$(PY) bench/bench_spaces.py

clean:
	rm -rf $(DATA) .pytest_cache .mypy_cache .ruff_cache
