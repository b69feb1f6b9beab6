# ProactBench Workbench — the two commands are `make run` and `make test` (see README).
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
ADDR   ?= 127.0.0.1:8000

.PHONY: run test lint format bench lock clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

# Installs are pinned by constraints.txt, so a fresh machine gets the versions CI tested.
# `make run` needs only what the app imports; the test and lint tools (the `dev` extra:
# Playwright, mypy and the stubs, Hypothesis, Schemathesis, …) come with the first `make test`
# or `make lint`, so a first start does not wait for them.
$(VENV)/.installed-app: $(BIN)/python pyproject.toml constraints.txt
	$(BIN)/python -m pip install --quiet -c constraints.txt -e .
	touch $@

$(VENV)/.installed: $(BIN)/python pyproject.toml constraints.txt
	$(BIN)/python -m pip install --quiet -c constraints.txt -e '.[dev]'
	touch $@ $(VENV)/.installed-app

## run: set everything up (embedded default: SQLite, filesystem broker, replay provider, demo
##      data and logins) and start the web server and a Celery worker; Ctrl-C stops both.
run: $(VENV)/.installed-app
	DEBUG=$${DEBUG:-1} $(BIN)/python manage.py migrate --no-input -v0
	DEBUG=$${DEBUG:-1} $(BIN)/python manage.py load_demo
	DEBUG=$${DEBUG:-1} $(BIN)/python manage.py devserver $(ADDR)

## test: install and run the whole test suite.
test: $(VENV)/.installed
	$(BIN)/python -m pytest $(PYTEST_ARGS)

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
