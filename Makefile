# The two commands of the contract: `make run` and `make test` (plus `make bench`).
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: run test test-fast bench lint install clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[dev]'
	touch $(STAMP)

install: $(STAMP)

## Sandbox (no GitHub App credentials) or production-like: migrate, seed (sandbox only), then
## web + worker + beat (+ the GitHub stand-in and simulated CI in sandbox). Ctrl-C stops all.
run: $(STAMP)
	$(BIN)/python manage.py runstack

## The whole suite. DATABASE_URL/REDIS_URL switch it to PostgreSQL/Redis; browser tests run
## when Debian's Chromium is installed (.ci/run installs it).
test: $(STAMP)
	$(BIN)/python -m pytest

test-fast: $(STAMP)
	$(BIN)/python -m pytest -x -q -m "not browser and not slow and not worker"

## Lint and formatting check (ruff, configured in pyproject.toml); changes nothing.
lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

bench: $(STAMP)
	$(BIN)/python manage.py bench

clean:
	rm -rf $(VENV) var
