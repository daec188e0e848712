# `make demo` and `make test` work on a fresh machine: they create .venv themselves.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-dev

.PHONY: install demo test bench lint clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[dev]'
	touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	$(BIN)/python examples/stdlib_demo.py "how do I parse command line arguments"
	@for example in examples/langchain_chain.py examples/llamaindex_query_engine.py; do \
		if [ -f $$example ]; then echo; echo "== $$example"; $(BIN)/python $$example || exit 1; fi; \
	done

test: $(STAMP) lint
	$(BIN)/python -m pytest

bench: $(STAMP)
	$(BIN)/python -m recallpack.bench

lint: $(STAMP)
	$(BIN)/ruff check recallpack tests examples
	$(BIN)/mypy

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache .hypothesis
