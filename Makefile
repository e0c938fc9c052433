# Two entry points (see README): `make demo` runs the streaming job end to end on embedded
# defaults; `make test` runs the whole test suite. Both create .venv on first use.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python

.PHONY: demo test dev-test lint bench clean

$(VENV)/.installed: pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[test]'
	touch $@

demo: $(VENV)/.installed
	PATH="$(CURDIR)/$(VENV)/bin:$$PATH" bash scripts/demo.sh

# Two workers: much of the suite waits on JVMs, servers and timeouts, not on the CPU. Tests
# that share a session server or state stay on one worker (tests/conftest.py groups them):
# the Hive 4 and the Hive 3.1 metastore tests each, tests/faults, tests/cluster; with
# --dist loadgroup the largest groups start first.
TEST_WORKERS ?= 2

test: $(VENV)/.installed
	$(PY) -m pytest -n $(TEST_WORKERS) --dist loadgroup --durations=40

dev-test: $(VENV)/.installed
	$(PY) -m pytest -m "not slow and not spark and not kafka"

# Style and types (pyproject.toml's [tool.ruff] and [tool.mypy]); CI fails on any finding.
lint: $(VENV)/.installed
	$(VENV)/bin/ruff check ingest tests jobs
	$(VENV)/bin/mypy ingest

# The benchmarks: `python -m ingest.bench NAME` (ingest/bench/); this runs `writer`.
bench: $(VENV)/.installed
	$(PY) -m ingest.bench writer

clean:
	rm -rf demo-output .pytest_cache
