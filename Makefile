# Two entry points (see README): `make demo` runs the streaming job end to end on embedded
# defaults; `make test` runs the whole test suite. Both create .venv on first use.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python

.PHONY: demo test dev-test bench clean

$(VENV)/.installed: pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[test]'
	touch $@

demo: $(VENV)/.installed
	PATH="$(CURDIR)/$(VENV)/bin:$$PATH" bash scripts/demo.sh

# Two workers for most of the suite: much of it waits on JVMs, servers and timeouts, not on the
# CPU. Then, in one process: the Hive Metastore tests (Hive's cleaner and reaper rules count
# every open transaction on the server, and their timing must not compete with the Spark jobs
# of the rest) and tests/faults (its last test checks what all its cases found in-process).
TEST_WORKERS ?= 2

test: $(VENV)/.installed
	$(PY) -m pytest -n $(TEST_WORKERS) --dist loadgroup --durations=30 \
		--ignore=tests/hms --ignore=tests/faults
	$(PY) -m pytest --durations=15 tests/hms tests/faults

dev-test: $(VENV)/.installed
	$(PY) -m pytest -m "not slow and not spark and not kafka"

bench: $(VENV)/.installed
	$(PY) -m ingest.bench writer

clean:
	rm -rf demo-output .pytest_cache
