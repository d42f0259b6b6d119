# Two commands do all the setup on a fresh machine: `make run` and `make test`.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
HOST ?= 127.0.0.1
PORT ?= 8000

.PHONY: install run test lint bench bench-smoke clean

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[dev]'
	touch $@

install: $(VENV)/.installed

# Serve MCP over streamable HTTP on $(HOST):$(PORT), against an embedded local Ray cluster
# (or the cluster in RAY_ADDRESS). The URL to connect to is printed on stderr.
run: install
	$(VENV)/bin/ray-mcp --transport streamable-http --host $(HOST) --port $(PORT)

lint: install
	$(VENV)/bin/ruff check src tests bench
	$(VENV)/bin/ruff format --check src tests bench
	$(VENV)/bin/mypy

# Lint, type-check, then every test against a real Ray head started in a private temp dir.
test: lint
	$(PY) -m pytest -q

bench: install
	$(PY) -m bench.startup

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache dist build
