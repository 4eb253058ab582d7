# Two entry points (see README): `make demo` and `make test`. Both build .venv first.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: demo test bench clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[test]'
	$(BIN)/python -m compileall -q airflow_hive_acid   # compiled once, not at every job start
	touch $(STAMP)

demo: $(STAMP)
	PATH="$(CURDIR)/$(BIN):$$PATH" ./scripts/demo.sh

# Lint and type check first (seconds), then the suite. pytest exits 5 when it collects nothing;
# make treats that as the failure it is.
test: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/mypy
	PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/python -m pytest $(PYTEST_ARGS)

# make bench [BENCH=metastore|merge|amplification|compaction] [BENCH_ARGS=...]
BENCH ?= metastore
bench: $(STAMP)
	$(BIN)/pip install --quiet -e '.[bench]'
	PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/python bench/$(BENCH).py $(BENCH_ARGS)

clean:
	rm -rf $(VENV) .hive-acid
