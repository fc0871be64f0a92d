# The two commands of the contract: `make run` and `make test` (plus `make bench`).
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
INSTALL_LOG := var/log/install.log
# pipefail: a failed pip install must fail the target even though its output is piped.
SHELL := /bin/bash
.SHELLFLAGS := -o pipefail -c
# Turns pip's output into one line per phase that counts up in place.
PROGRESS_AWK := '/^(Collecting|Requirement already satisfied)/ { n++; printf "\r  resolving: %d packages", n; fflush() } \
  /^Installing collected packages/ { printf "\n  installing…"; fflush() } \
  /^Successfully installed/ { printf "\r  installed %d package(s).\n", NF - 2; done = 1 } \
  END { if (!done) printf "\n  already up to date.\n" }'

.PHONY: run test test-fast crawl bench lint install clean pytorch-fixtures

## Progress instead of silence: one updating line per phase; pip's full output in var/log/install.log.
$(STAMP): pyproject.toml
	@mkdir -p $(dir $(INSTALL_LOG)) && : > $(INSTALL_LOG)
	@test -x $(BIN)/python || { echo "Creating the virtualenv in $(VENV)"; $(PYTHON) -m venv $(VENV); }
	@echo "Installing dependencies into $(VENV) (about a minute the first time; full output in $(INSTALL_LOG))"
	@$(BIN)/python -m pip install --upgrade pip >> $(INSTALL_LOG) 2>&1 || { tail -n 20 $(INSTALL_LOG); exit 1; }
	@$(BIN)/python -m pip install --progress-bar off -e '.[dev]' 2>&1 | tee -a $(INSTALL_LOG) | awk $(PROGRESS_AWK) \
	  || { echo "pip install failed; the end of $(INSTALL_LOG):"; tail -n 25 $(INSTALL_LOG); exit 1; }
	@touch $(STAMP)

install: $(STAMP)

## Sandbox (no GitHub App credentials) or production-like: migrate, seed (sandbox only), then
## web + worker + beat (+ the GitHub stand-in and simulated CI in sandbox). Ctrl-C stops all.
## LOGS=1 (or LOG_LEVEL=…) also streams every process's full log to the terminal; var/log/ has them anyway.
run: $(STAMP)
	@$(BIN)/python manage.py runstack $(if $(LOGS),--logs)

## The whole suite. DATABASE_URL/REDIS_URL switch it to PostgreSQL/Redis; browser tests run
## when Debian's Chromium is installed (.ci/run installs it).
test: $(STAMP)
	$(BIN)/python -m pytest

## A sandbox left running until it has produced every kind of job, then every page it links to
## opened at 1600 and 390 px (tests/crawl): 5xx, console errors, sideways scroll and marks that
## disagree with the API fail it. About 10 minutes; needs Debian's Chromium.
crawl: $(STAMP)
	CRCR_CRAWL=1 $(BIN)/python -m pytest tests/crawl -p no:cacheprovider -s

test-fast: $(STAMP)
	$(BIN)/python -m pytest -x -q -m "not browser and not slow and not worker"

## Remake tests/fixtures/pytorch-reports and relay/policy/torch_device_types.py with the real producers: torch's own test machinery,
## pytest and unittest-xml-reporting, in a venv of their own (torch is never a project dependency).
TORCH_VENV ?= /tmp/crcr-torch-venv
pytorch-fixtures:
	test -x $(TORCH_VENV)/bin/python || python3 -m venv $(TORCH_VENV)
	$(TORCH_VENV)/bin/pip install -q torch==2.13.0 pytest unittest-xml-reporting expecttest numpy
	$(TORCH_VENV)/bin/python devtools/pytorch_reports/make_fixtures.py
	$(TORCH_VENV)/bin/python devtools/pytorch_reports/device_types.py > relay/policy/torch_device_types.py

## Lint and formatting check (ruff, configured in pyproject.toml); changes nothing.
lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

## Both configurations (SQLite + embedded broker, then PostgreSQL + Redis), one table of every verdict.
bench: $(STAMP)
	$(BIN)/python manage.py bench --both

clean:
	rm -rf $(VENV) var
