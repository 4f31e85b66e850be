# Two commands on a fresh machine: `make demo` and `make test`.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip
UI_VENDOR := src/mlgoodput/ui/static/vendor/.built

.PHONY: demo test test-fast install install-test system-deps ui-assets lint format-check typecheck unit bench compat clean

$(PY):
	$(PYTHON) -m venv $(VENV)
	$(PIP) install -q --upgrade pip

$(VENV)/.installed: $(PY) pyproject.toml
	$(PIP) install -q -e '.[all]'
	touch $@

# The web UI's charting library (uPlot), from npm with the lockfile in js/; never committed.
# UI_ASSETS_IF=--if-npm: without npm, say so in one line and go on (the demo needs no charts).
$(UI_VENDOR): js/package.json js/package-lock.json scripts/build-ui-assets.sh
	bash scripts/build-ui-assets.sh $(UI_ASSETS_IF)

ui-assets: $(UI_VENDOR)

# the tests need the charts (the browser tests): here npm is required
$(VENV)/.installed-test: $(VENV)/.installed $(UI_VENDOR)
	$(PIP) install -q -e '.[all,test]'
	touch $@

install: $(VENV)/.installed

install-test: $(VENV)/.installed-test system-deps

system-deps:
	bash scripts/install-system-deps.sh

# Python is all the demo needs; the web UI's charts are built too where npm is installed.
demo: install
	@$(MAKE) --no-print-directory ui-assets UI_ASSETS_IF=--if-npm
	$(PY) -m mlgoodput demo

lint: install-test
	$(PY) -m ruff check src tests bench scripts

# The formatter's layout is part of `make test`: `ruff format src tests bench scripts` fixes it.
format-check: install-test
	$(PY) -m ruff format --check src tests bench scripts

typecheck: install-test
	$(PY) -m mypy src

# Tests that fork the test process run first, in a pytest process of their own: forking a
# process that has loaded JAX (multithreaded) can deadlock the child. Each run ends with its
# 25 slowest tests.
DURATIONS := --durations=25
unit: install-test
	$(PY) -m pytest -q -m forks $(DURATIONS) $(PYTEST_ARGS)
	$(PY) -m pytest -q -m "not forks" $(DURATIONS) $(PYTEST_ARGS)

test: lint format-check typecheck unit

# The inner loop; CI runs `make test`. Every test but the `slow` ones and the few that fork
# (those need a pytest process of their own, which costs more to start than they take), on
# two processes (pytest-xdist: each test has its own data folder and free ports).
FAST_WORKERS ?= 2
test-fast: install-test
	$(PY) -m pytest -q -m "not slow and not forks" -n $(FAST_WORKERS) $(DURATIONS) $(PYTEST_ARGS)

# docs/compatibility.md from the installed peer packages (tests fail when it is stale)
compat: install-test
	$(PY) scripts/compatibility.py

bench: install-test
	$(PY) bench/run_all.py

clean:
	rm -rf $(VENV) build dist js/node_modules src/mlgoodput/ui/static/vendor src/*.egg-info .pytest_cache .mypy_cache .ruff_cache
