# chongming — every target installs uv if needed and syncs the environment itself.
SHELL := /bin/bash
export UV_PYTHON_DOWNLOADS := never
export UV_PYTHON ?= python3.11
UV ?= uv
PYTEST_ARGS ?=

.DEFAULT_GOAL := help

.PHONY: help uv sync demo test lint bench soak fmt dashboard build

help: ## show the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-10s %s\n", $$1, $$2}'

uv:
	@command -v $(UV) >/dev/null 2>&1 || python3 -m pip install --quiet uv

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
