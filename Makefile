# The two commands a user needs: `make demo` and `make test`. Both run `setup` first, which is
# idempotent: it installs system packages only when missing and reuses the virtualenv.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: setup test test-unit test-integration lint demo demo-kinesis quickstart walkthrough bench clean
DURATION ?= 240

setup: $(STAMP)
	@bash scripts/setup-system.sh
	@$(BIN)/python -m autosizer.simulator.warm

$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[dev]'
	@touch $(STAMP)

test: setup
	$(BIN)/ruff check autosizer tests benchmarks
	$(BIN)/pytest -q -n 3 --dist loadgroup

test-unit: setup
	$(BIN)/pytest -q tests/unit

test-integration: setup
	$(BIN)/pytest -q tests/integration

demo: setup
	$(BIN)/python examples/demo.py --duration $(DURATION)

demo-kinesis: setup
	$(BIN)/python examples/kinesis_demo.py

quickstart: setup
	$(BIN)/python examples/quickstart.py

walkthrough: setup
	$(BIN)/python examples/elasticity_walkthrough.py

bench: setup
	$(BIN)/python benchmarks/bench_buckets.py
	$(BIN)/python benchmarks/bench_migrate.py
	$(BIN)/python benchmarks/bench_daemon.py

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis .ruff_cache
