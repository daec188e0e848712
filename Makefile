# `make demo`, `make test` and `make notebook` work on a fresh clone: they create .venv, and
# each installs only what it needs (the extras demo, dev and notebook of pyproject.toml).
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
# uv installs in seconds what pip takes a minute or more for. It is taken from PATH, or put into
# .venv by pip; if neither works, pip installs everything. `make PIP=1 demo` forces pip.
PIP ?=
UV := $(if $(PIP),,$(or $(shell command -v uv 2>/dev/null),$(abspath $(BIN))/uv))
# Strict editable mode links the package into .venv with a plain .pth file, which mypy and IDEs
# follow: a project that depends on this checkout type-checks against it. The default mode hides
# the package behind an import hook, and every recallpack type becomes Any to mypy.
EDITABLE := --config-settings editable_mode=strict -e
# Strict mode links the files that exist when it installs: install again when one is added or
# removed (editing a file needs nothing: the links point at it).
PACKAGE_FILES := $(shell find recallpack -type f ! -path '*/__pycache__/*' ! -name '*.pyc' 2>/dev/null | LC_ALL=C sort)

# $(call install,ARGS): pip-style arguments, through uv when there is one, else pip (at least
# 23.1, which passes --config-settings to an editable build). uv copies
# files rather than hard-linking them from its cache: nltk (under llama-index) refuses to open
# a data file that has more than one link.
define install
	@if [ -n "$(UV)" ] && [ -x "$(UV)" ]; then \
		echo "uv pip install $(1)"; $(UV) pip install --link-mode=copy --python $(BIN)/python $(1); \
	else \
		$(BIN)/python -m pip --version >/dev/null 2>&1 || $(BIN)/python -m ensurepip --upgrade; \
		$(BIN)/python -m pip install --progress-bar on --upgrade 'pip>=23.1'; \
		echo "pip install $(1)"; $(BIN)/python -m pip install --progress-bar on $(1); \
	fi
endef

.PHONY: install demo test notebook bench lint serve clean FORCE

# Without pip the venv is made in a fraction of a second; the interpreter's own pip puts uv in it.
$(BIN)/python:
	$(PYTHON) -m venv --without-pip $(VENV)
	@if [ -n "$(UV)" ] && [ ! -x "$(UV)" ]; then \
		$(PYTHON) -m pip --python $(BIN)/python install --progress-bar on uv \
			|| echo "uv could not be installed: pip installs everything (slower)"; \
	fi

$(VENV)/.package-files: FORCE | $(BIN)/python
	@echo '$(PACKAGE_FILES)' | cmp -s - $@ || echo '$(PACKAGE_FILES)' > $@

$(VENV)/.installed-%: pyproject.toml $(VENV)/.package-files | $(BIN)/python
	$(call install,$(EDITABLE) '.[$*]')
	@touch $@

install: $(VENV)/.installed-dev

demo: $(VENV)/.installed-demo
	$(BIN)/python examples/stdlib_demo.py "how do I parse command line arguments"
	@for example in examples/langchain_chain.py examples/llamaindex_query_engine.py examples/mcp_client.py; do \
		if [ -f $$example ]; then echo; echo "== $$example"; $(BIN)/python $$example || exit 1; fi; \
	done

test: $(VENV)/.installed-dev lint
	$(BIN)/python -m pytest

# Opens examples/quickstart.ipynb in JupyterLab, with .venv as its kernel.
notebook: $(VENV)/.installed-notebook
	$(BIN)/jupyter lab examples/quickstart.ipynb

# The recall tool over MCP on stdio, searching this repository's docs/: what an MCP client starts
# (README, "The recall tool over MCP"). Installs the mcp extra only.
serve: $(VENV)/.installed-mcp
	$(BIN)/recallpack serve --docs docs

bench: $(VENV)/.installed-dev
	$(BIN)/python -m recallpack.bench

lint: $(VENV)/.installed-dev
	$(BIN)/ruff check recallpack tests examples
	$(BIN)/mypy

clean:
	rm -rf $(VENV) build .pytest_cache .mypy_cache .ruff_cache .hypothesis
