# chongming — every target installs uv if needed and syncs the environment itself.
SHELL := /bin/bash
export UV_PYTHON_DOWNLOADS := never
# uv runs on the first of these on PATH that is a Python >= 3.11 (choose another with
# `make UV_PYTHON=/path/to/python ...`; `make python` says which one is used)
PYTHON_CANDIDATES := python3.11 python3.12 python3.13 python3.14 python3
ifeq ($(origin UV_PYTHON),undefined)
UV_PYTHON := $(shell for p in $(PYTHON_CANDIDATES); do \
	if command -v $$p >/dev/null 2>&1 && \
		$$p -c 'import sys; sys.exit(sys.version_info < (3, 11))' >/dev/null 2>&1; \
	then echo $$p; break; fi; done)
endif
export UV_PYTHON
UV ?= uv

define NEED_PYTHON
@test -n "$(UV_PYTHON)" || { echo "no Python >= 3.11 on PATH (tried: $(PYTHON_CANDIDATES));" \
	"install one, or name it: make UV_PYTHON=/path/to/python3.12 $@" >&2; exit 1; }
endef
PYTEST_ARGS ?=

.DEFAULT_GOAL := help

.PHONY: help python uv sync demo test lint bench soak fmt dashboard build

help: ## show the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-10s %s\n", $$1, $$2}'

python: ## show the Python the targets run on
	$(NEED_PYTHON)
	@echo "$(UV_PYTHON)"

uv:
	$(NEED_PYTHON)
	@command -v $(UV) >/dev/null 2>&1 || $(UV_PYTHON) -m pip install --quiet uv

sync: uv ## install every package and the dev tools into .venv
	@$(UV) sync --all-packages --all-extras --frozen --quiet

demo: sync ## run the demo
	@$(UV) run --frozen python -m chongming_task.demo

test: sync ## run the whole test suite
	@$(UV) run --frozen pytest $(PYTEST_ARGS)

lint: sync ## ruff, ruff format --check, mypy --strict, import-linter
	$(UV) run --frozen ruff check .
	$(UV) run --frozen ruff format --check .
	$(UV) run --frozen mypy packages/*/src conftest.py tests-integration/*.py benchmarks examples
	@for tests in packages/*/tests tests-integration/*/; do \
		echo "mypy $$tests"; $(UV) run --frozen mypy $$tests || exit 1; \
	done
	$(UV) run --frozen lint-imports

bench: sync ## run the benchmarks (ratios against baselines measured in the same run)
	@$(UV) run --frozen python benchmarks/run.py

soak: sync ## the long reliability soak: 500 crash seeds, PostgreSQL restarts (needs CHONGMING_TEST_POSTGRES)
	CHONGMING_SOAK=1 $(UV) run --frozen pytest tests-integration/reliability -q

dashboard: sync ## open the live dashboard on the demo database (run make demo first)
	@$(UV) run --frozen chongming-task --db .demo/tasks.db dashboard

fmt: sync ## format and autofix
	$(UV) run --frozen ruff format .
	$(UV) run --frozen ruff check --fix .

build: uv ## build a wheel and an sdist of every distribution into dist/
	$(UV) build --all-packages --out-dir dist
