# Two commands on a fresh machine: `make demo` and `make test`.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip

.PHONY: demo test install install-test system-deps lint typecheck unit bench compat clean

$(PY):
	$(PYTHON) -m venv $(VENV)
	$(PIP) install -q --upgrade pip

$(VENV)/.installed: $(PY) pyproject.toml
	$(PIP) install -q -e '.[all]'
	touch $@

$(VENV)/.installed-test: $(VENV)/.installed
	$(PIP) install -q -e '.[all,test]'
	touch $@

install: $(VENV)/.installed

install-test: $(VENV)/.installed-test system-deps

system-deps:
	bash scripts/install-system-deps.sh

demo: install
	$(PY) -m mlgoodput demo

lint: install-test
	$(PY) -m ruff check src tests bench scripts

typecheck: install-test
	$(PY) -m mypy src

# Tests that fork the test process run first, in a pytest process of their own: forking a
# process that has loaded JAX (multithreaded) can deadlock the child.
unit: install-test
	$(PY) -m pytest -q -m forks $(PYTEST_ARGS)
	$(PY) -m pytest -q -m "not forks" $(PYTEST_ARGS)

test: lint typecheck unit

# docs/compatibility.md from the installed peer packages (tests fail when it is stale)
compat: install-test
	$(PY) scripts/compatibility.py

bench: install-test
	$(PY) bench/run_all.py

clean:
	rm -rf $(VENV) build dist src/*.egg-info .pytest_cache .mypy_cache .ruff_cache
