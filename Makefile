# Two commands do all the setup on a fresh machine: `make run` and `make test`.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
HOST ?= 127.0.0.1
PORT ?= 8270

.PHONY: install run test test-fast lint bench bench-smoke clean

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[dev]'
	touch $@

install: $(VENV)/.installed

# Serve MCP over streamable HTTP on $(HOST):$(PORT), against an embedded local Ray cluster
# (or the cluster in RAY_ADDRESS). The URL to connect to is printed on stderr. Write tools are on and loopback
# needs no token, so any local user can submit jobs: `make run ARGS=--read-only` offers only read tools.
ARGS ?=
run: install
	$(VENV)/bin/ray-mcp --transport streamable-http --host $(HOST) --port $(PORT) $(ARGS)

lint: install
	$(VENV)/bin/ruff check src tests bench eval
	$(VENV)/bin/ruff format --check src tests bench eval
	$(VENV)/bin/mypy

# Lint, type-check, then every test against a real Ray head started in a private temp dir.
test: lint
	$(PY) -m pytest -q

# The loop to run after every edit: lint, type-check, then every test that needs no Ray head and no subprocess
# (the tests not marked live, see tests/rules.py).
test-fast: lint
	$(PY) -m pytest -q -m "not live"

# The benchmark suite (bench/__main__.py) on an embedded cluster: ~25 min. It rewrites the results block of
# docs/benchmarks.md and the plot. `make bench-smoke` runs it small, in ~2 min (the test suite runs it too).
bench: install
	$(PY) -m pip install -q -e '.[dev,bench]'
	$(PY) -m bench --plot docs/benchmarks.png --update-doc docs/benchmarks.md --json bench/results/latest.json

bench-smoke: install
	$(PY) -m bench --smoke

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache dist build
