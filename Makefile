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
# a data file that has more than one link. The installer's own output goes to a log: one line
# says what was installed, and the whole log is shown only if the install fails.
INSTALL_LOG := $(VENV)/install.log
define install
	@if [ -n "$(UV)" ] && [ -x "$(UV)" ]; then \
		$(UV) pip install --link-mode=copy --python $(BIN)/python $(1) >$(INSTALL_LOG) 2>&1; \
	else \
		{ $(BIN)/python -m pip --version || $(BIN)/python -m ensurepip --upgrade; \
		  $(BIN)/python -m pip install --upgrade 'pip>=23.1' && $(BIN)/python -m pip install $(1); \
		} >$(INSTALL_LOG) 2>&1; \
	fi || { cat $(INSTALL_LOG); echo "install failed: $(1) (its output is above and in $(INSTALL_LOG))"; exit 1; }

endef

.PHONY: install inspector demo test test-steps $(TEST_STEPS) docs notebook bench bench-check lint serve clean FORCE

# Without pip the venv is made in a fraction of a second; the interpreter's own pip puts uv in it.
$(BIN)/python:
	@$(PYTHON) -m venv --without-pip $(VENV)
	@if [ -n "$(UV)" ] && [ ! -x "$(UV)" ]; then \
		$(PYTHON) -m pip --python $(BIN)/python install uv >$(VENV)/uv-install.log 2>&1 \
			|| echo "uv could not be installed: pip installs everything (slower; see $(VENV)/uv-install.log)"; \
	fi

$(VENV)/.package-files: FORCE | $(BIN)/python
	@echo '$(PACKAGE_FILES)' | cmp -s - $@ || echo '$(PACKAGE_FILES)' > $@

$(VENV)/.installed-%: pyproject.toml $(VENV)/.package-files | $(BIN)/python
	@echo "installing recallpack[$*] into $(VENV) (the installer's output: $(INSTALL_LOG))"
	$(call install,$(EDITABLE) '.[$*]')
	@touch $@

install: $(VENV)/.installed-dev

demo: $(VENV)/.installed-demo
	@echo "== examples/stdlib_demo.py"; $(BIN)/python examples/stdlib_demo.py "how do I parse command line arguments"
	@for example in examples/langchain_chain.py examples/llamaindex_query_engine.py examples/mcp_client.py \
			examples/agent_memory.py; do \
		if [ -f $$example ]; then echo; echo "== $$example"; $(BIN)/python $$example || exit 1; fi; \
	done

# `make test` is every step below, in order; each runs alone too (`make test-ray`). The docs are
# built strictly first: a dead link or a renamed name in the API reference fails. The pytest steps
# are split so the bulk runs on every core, and what cannot or need not share them runs alone:
# - test-main: every test file not named below, on pytest-xdist workers (one per core; WORKERS=0
#   runs them in this process), a whole module per worker so its module fixtures are built once;
# - test-forks: recall_many's forked workers refuse to fork while another thread is alive, and an
#   xdist worker has its own threads; the scale tests start process pools of their own;
# - test-ray: the Ray Data example starts a local Ray of two CPUs;
# - test-notebook: runs examples/quickstart.ipynb in a fresh Jupyter kernel.
# .ci/run checks that each of TEST_STEPS reported passed tests.
TEST_STEPS := test-main test-forks test-ray test-notebook
FORK_TESTS := tests/test_recall_many.py tests/test_scale.py
RAY_TESTS := tests/test_ray_example.py
NOTEBOOK_TESTS := tests/test_notebook.py
WORKERS ?= auto
PYTEST := $(BIN)/python -m pytest

test: $(VENV)/.installed-dev lint docs $(TEST_STEPS)

test-steps:
	@echo $(TEST_STEPS)

test-main: $(VENV)/.installed-dev inspector
	@echo "== test-main: every test but the steps below, on $(WORKERS) workers"
	$(PYTEST) -n $(WORKERS) --dist loadscope $(foreach f,$(FORK_TESTS) $(RAY_TESTS) $(NOTEBOOK_TESTS),--ignore=$(f))

test-forks: $(VENV)/.installed-dev
	@echo "== test-forks: forked and process-pool workers, in one process with no other thread"
	$(PYTEST) $(FORK_TESTS)

test-ray: $(VENV)/.installed-dev
	@echo "== test-ray: the Ray Data example"
	$(PYTEST) $(RAY_TESTS)

test-notebook: $(VENV)/.installed-dev
	@echo "== test-notebook: the quickstart notebook in a fresh kernel"
	$(PYTEST) $(NOTEBOOK_TESTS)

# The MCP Inspector, the reference MCP client that tests/test_mcp_inspector.py drives (its --cli
# mode), at a pinned version, into build/inspector with npm. Without npm it is left out (.ci/run
# installs Debian's nodejs and npm where node is missing), and that test skips, saying so.
INSPECTOR_VERSION := 2.12.0
INSPECTOR_STAMP := build/inspector/.installed-$(INSPECTOR_VERSION)
inspector: $(INSPECTOR_STAMP)
$(INSPECTOR_STAMP):
	@if command -v npm >/dev/null 2>&1; then \
		echo "installing @modelcontextprotocol/inspector@$(INSPECTOR_VERSION) into build/inspector"; \
		mkdir -p build/inspector; \
		npm install --prefix build/inspector --no-audit --no-fund --omit=dev --ignore-scripts \
			@modelcontextprotocol/inspector@$(INSPECTOR_VERSION) >build/inspector/install.log 2>&1 \
			|| { cat build/inspector/install.log; echo "npm install of the MCP Inspector failed"; exit 1; }; \
		touch $@; \
	else echo "npm is not installed: the MCP Inspector is left out, and tests/test_mcp_inspector.py skips"; fi

# The site and API reference (mkdocs.yml), offline, into site/; warnings are errors.
docs: $(VENV)/.installed-docs
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --quiet
	@echo "docs: built site/index.html"

# Opens examples/quickstart.ipynb in JupyterLab, with .venv as its kernel.
notebook: $(VENV)/.installed-notebook
	$(BIN)/jupyter lab examples/quickstart.ipynb

# The recall tool over MCP on stdio, searching this repository's docs/: what an MCP client starts
# (README, "The recall tool over MCP"). Installs the mcp extra only.
serve: $(VENV)/.installed-mcp
	$(BIN)/recallpack serve --docs docs

bench: $(VENV)/.installed-dev
	$(BIN)/python -m recallpack.bench

# The bench's ratio targets only, each the best of a few runs and measured again before it
# counts as missed; exits 1 on a target missed twice (docs/performance.md, "The guard").
bench-check: $(VENV)/.installed-dev
	$(BIN)/python -m recallpack.bench --check --quick

lint: $(VENV)/.installed-dev
	$(BIN)/ruff check recallpack tests examples
	$(BIN)/mypy

clean:
	rm -rf $(VENV) build site .pytest_cache .mypy_cache .ruff_cache .hypothesis
