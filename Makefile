# ProactBench Workbench — the two commands are `make run` and `make test` (see README).
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
ADDR   ?= 127.0.0.1:8000

.PHONY: run test lint format bench lock clean

# The installer: uv (pinned in constraints.txt) fetches and unpacks the wheels in parallel, where
# pip does each in turn. uv reads no pip.conf: behind a package mirror set UV_DEFAULT_INDEX, or
# install with `make run INSTALLER=pip`.
# With uv, `make run`'s install compiles no bytecode: a first start imports about 2,400 of the
# 12,000 modules installed, and Python compiles each on its first import and keeps the result,
# so compiling them all up front (about 18 s of CPU) cost more than it saved (4 s of first
# imports; bench/README.md). PYTHONDONTWRITEBYTECODE=1 keeps nothing: each process then compiles
# its imports again. The test tools' install compiles all of site-packages, on every core: the
# test suite imports most of it, often in processes that run side by side.
INSTALLER ?= uv
ifeq ($(INSTALLER),uv)
INSTALL       := $(BIN)/uv pip install --quiet --python $(BIN)/python
COMPILE_ALL   := --compile-bytecode
INSTALLER_EXE := $(BIN)/uv
else ifeq ($(INSTALLER),pip)
INSTALL       := $(BIN)/python -m pip install --quiet
COMPILE_ALL   :=
INSTALLER_EXE :=
else
$(error INSTALLER must be uv or pip, not "$(INSTALLER)")
endif

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

$(BIN)/uv: | $(BIN)/python
	$(BIN)/python -m pip install --quiet -c constraints.txt uv

# Installs are pinned by constraints.txt, so a fresh machine gets the versions CI tested.
# `make run` needs only what the app imports; the test and lint tools (the `dev` extra:
# Playwright, mypy and the stubs, Hypothesis, Schemathesis, …) come with the first `make test`
# or `make lint`, so a first start does not wait for them.
$(VENV)/.installed-app: $(BIN)/python $(INSTALLER_EXE) pyproject.toml constraints.txt
	$(INSTALL) -c constraints.txt -e .
	touch $@

$(VENV)/.installed: $(BIN)/python $(INSTALLER_EXE) pyproject.toml constraints.txt
	$(INSTALL) $(COMPILE_ALL) -c constraints.txt -e '.[dev]'
	touch $@ $(VENV)/.installed-app

# Django's system checks import the whole URLconf and with it NumPy, SciPy and statsmodels
# (about 2.4 s of CPU each time): the web server that devserver starts runs them before it
# serves, so migrate, load_demo and devserver itself skip them.
## run: set everything up (embedded default: SQLite, filesystem broker, replay provider, demo
##      data and logins) and start the web server and a Celery worker; Ctrl-C stops both.
run: $(VENV)/.installed-app
	DEBUG=$${DEBUG:-1} $(BIN)/python manage.py migrate --no-input -v0 --skip-checks
	DEBUG=$${DEBUG:-1} $(BIN)/python manage.py load_demo --skip-checks
	DEBUG=$${DEBUG:-1} $(BIN)/python manage.py devserver --skip-checks $(ADDR)

## test: install and run the whole test suite, in TEST_PROCESSES processes at once.
# pytest-xdist, one process a core by default: the suite waits on workers, servers and browsers
# as much as it computes, but its property tests are CPU-bound, and a third process on two cores
# made the PostgreSQL half slower (docs/reliability.md). Each process has its own test database
# and its own Redis database (tests/parallel.py). `--dist load` hands each process its tests in
# collection order, so each keeps pytest-django's order: the tests that empty the tables
# (transactional ones) after those that expect the migrations' rows. TEST_PROCESSES=0: one
# process, as plain `pytest` runs.
TEST_PROCESSES ?= auto
test: $(VENV)/.installed
	$(BIN)/python -m pytest -n $(TEST_PROCESSES) --dist load $(PYTEST_ARGS)

lint: $(VENV)/.installed
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

format: $(VENV)/.installed
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

## bench: run every benchmark under bench/ (each ends with a RESULT line).
bench: $(VENV)/.installed
	$(BIN)/python bench/run_all.py

## lock: refresh constraints.txt from the current environment after changing pyproject.toml.
lock: $(VENV)/.installed
	$(BIN)/python -m pip freeze --exclude-editable | grep -v '^-e ' > constraints.txt

clean:
	rm -rf $(VENV) var staticfiles .pytest_cache
