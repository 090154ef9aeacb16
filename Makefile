# memory-pipeline — every target sets up its own virtual environment first.
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
DATA   ?= data
PYTEST_ARGS ?=
export Q

export HYBRID_RAG_DB_PATH    ?= $(DATA)/memory.db
export HYBRID_RAG_INDEX_PATH ?= $(DATA)/indices
export HYBRID_RAG_ARCHIVE_PATH ?= $(DATA)/archive

.PHONY: install run stop demo search ui alerts test lint fast-test bench docs clean

$(STAMP): pyproject.toml
	test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

install: $(STAMP)

run: install  ## start Dagster on the demo corpus: sensors ingest and index it, no clicks (PORT=3000)
	$(PY) -m memory_pipeline.pipeline.devserver check --home $(DATA)/dagster_home --port $(or $(PORT),3000)
	test -d $(DATA)/sources || { mkdir -p $(DATA)/sources && cp -R demo/corpus/. $(DATA)/sources/; }
	mkdir -p $(DATA)/dagster_home
	$(PY) -m memory_pipeline.pipeline.instance $(DATA)/dagster_home
	test -f $(DATA)/sources.yaml || cp demo/sources.yaml $(DATA)/sources.yaml
	@echo "Dagster UI: http://127.0.0.1:$(or $(PORT),3000)  (sources: $(DATA)/sources.yaml; Ctrl-C or make stop stops it)"
	DAGSTER_HOME=$(abspath $(DATA))/dagster_home \
	HYBRID_RAG_DB_PATH=$(abspath $(DATA))/memory.db \
	HYBRID_RAG_INDEX_PATH=$(abspath $(DATA))/indices \
	HYBRID_RAG_ARCHIVE_PATH=$(abspath $(DATA))/archive \
	MEMORY_PIPELINE_SOURCES=$(abspath $(DATA))/sources.yaml \
	MEMORY_PIPELINE_GOLDEN=$(abspath demo/golden.yaml) \
	MEMORY_PIPELINE_EVAL_DIR=$(abspath $(DATA))/eval \
	MEMORY_PIPELINE_UI_URL=http://127.0.0.1:$(or $(PORT),3000) \
	exec $(PY) -m memory_pipeline.pipeline.devserver start --home $(abspath $(DATA))/dagster_home \
	  --port $(or $(PORT),3000) -- -w workspace.yaml

stop:  ## stop the Dagster that make run started for $(DATA) (from any shell)
	@if test -x $(PY); then $(PY) -m memory_pipeline.pipeline.devserver stop --home $(DATA)/dagster_home; \
	else echo "nothing to stop (no $(VENV))"; fi

demo: install  ## no server: ingest the bundled sample corpus into $(DATA)/demo and answer two sample queries
	mkdir -p $(DATA)/demo
	HYBRID_RAG_DB_PATH=$(DATA)/demo/memory.db HYBRID_RAG_INDEX_PATH=$(DATA)/demo/indices \
	HYBRID_RAG_ARCHIVE_PATH=$(DATA)/demo/archive $(VENV)/bin/memory-pipeline demo

search: install  ## search the memory make run keeps (DATA=data/demo: make demo's): make search Q="…"
	@test -n "$$Q" || { echo 'usage: make search Q="your question" [DATA=data/demo]' >&2; exit 2; }
	$(VENV)/bin/memory-pipeline search "$$Q"

ui: install  ## make run's memory as a web page, with its pipeline's last runs (UI_PORT=8765)
	$(VENV)/bin/memory-pipeline ui --port $(or $(UI_PORT),8765) --dagster-home $(DATA)/dagster_home

alerts: install  ## the alerts make run's pipeline raised (data/alerts.jsonl)
	$(VENV)/bin/memory-pipeline alerts

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

docs: install  ## the documentation site in docs/_build/html, offline; any warning fails it
	@# -E: the references are generated from the code, which Sphinx does not watch
	scripts/docs-system-deps.sh
	$(VENV)/bin/sphinx-build -E -W --keep-going -q -b html docs docs/_build/html
	@echo "docs: file://$(abspath docs/_build/html)/index.html"

clean:
	rm -rf $(DATA) docs/_build .pytest_cache .mypy_cache .ruff_cache
