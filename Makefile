# Two commands do everything on a fresh machine:
#   make demo   set up, then run the bundled DOLFINx oracle on a sample of the bundled cases
#               (one record per family and construction method; make demo-full: all 645)
#   make test   set up, then run the project's own test suite and the house checks
# (make check: its quick tier, the tests marked docker, cluster, firedrake or slow left out)
VENV ?= .venv
STAMP := $(VENV)/.pdebench-setup
JOBS ?= 2
# the tests wait a quarter of their time (sleeping solvers, timeouts, pytest runs they start):
# one worker more than the cores fills it (the tests that time something run alone, below).
# A module's tests on one worker (--dist loadscope): its module-scoped fixtures (a wheel
# built, a pytest run over toy solvers) are made once, not once per worker
TEST_JOBS ?= 3
PYTEST := $(VENV)/bin/pytest
TIERS := docker or cluster or firedrake or slow
# A shell that forbids bytecode makes every Python these targets start (the tests start
# hundreds: pytest runs, the CLI, workers) compile the package and rewrite the tests' asserts
# again: collection takes 7.2 s instead of 4.7 s. The .pyc files go to git-ignored __pycache__.
unexport PYTHONDONTWRITEBYTECODE
DEMO := $(PYTEST) --pde-library=dolfinx --pde-submissions=submissions/oracle -n $(JOBS)

.PHONY: setup demo demo-full test check lint durations calibrate clean-reports \
	_test-parallel _test-alone _check-parallel _check-alone

setup: $(STAMP)

$(STAMP): pyproject.toml scripts/setup.sh
	PDEBENCH_VENV=$(VENV) scripts/setup.sh
	touch $@

demo: $(STAMP)
	$(DEMO) --pde-sample=1 --json-report --json-report-file=reports/demo.json

demo-full: $(STAMP)
	$(DEMO) --json-report --json-report-file=reports/demo-full.json

# The suite in two passes: the tests that time nothing on $(TEST_JOBS) workers, beside the house
# checks (lint); then those marked `alone` (they assert what a timing or the machine-wide
# session lock shows) one at a time. Each pass writes its JSON report: `make durations`
# turns them into tests/durations.json, which gives the `slow` tier (tests/conftest.py).
test: $(STAMP)
	@$(MAKE) --no-print-directory -j2 --output-sync=line lint _test-parallel
	@$(MAKE) --no-print-directory _test-alone

_test-parallel:
	PDEBENCH_REQUIRE_FEM=1 $(PYTEST) -m "not alone" -n $(TEST_JOBS) --dist loadscope -q \
		--json-report --json-report-file=reports/tests-parallel.json --json-report-omit=log,keywords,collectors
_test-alone:
	PDEBENCH_REQUIRE_FEM=1 $(PYTEST) -m alone -q \
		--json-report --json-report-file=reports/tests-alone.json --json-report-omit=log,keywords,collectors

# under 3 minutes on 2 shared cores, the same two passes without the slow and optional tiers
check: $(STAMP)
	@$(MAKE) --no-print-directory -j2 --output-sync=line lint _check-parallel
	@$(MAKE) --no-print-directory _check-alone

_check-parallel:
	$(PYTEST) -m "not ($(TIERS) or alone)" -q -n $(TEST_JOBS) --dist loadscope \
		--json-report --json-report-file=reports/check-parallel.json --json-report-omit=log,keywords,collectors
_check-alone:
	$(PYTEST) -m "alone and not ($(TIERS))" -q \
		--json-report --json-report-file=reports/check-alone.json --json-report-omit=log,keywords,collectors

# the house checks (configured in pyproject.toml): layers, lint, format, types
lint: $(STAMP)
	$(VENV)/bin/lint-imports --no-cache
	$(VENV)/bin/ruff check --no-fix pytest_pdebench benchmarks
	$(VENV)/bin/ruff format --check pytest_pdebench
	$(VENV)/bin/mypy

# rewrite tests/durations.json from the last `make test` and `make check` (their reports; what
# a check did not run keeps its figure)
durations:
	$(VENV)/bin/python scripts/durations.py reports/tests-parallel.json reports/tests-alone.json \
		reports/check-parallel.json reports/check-alone.json

# measure e_base/t_base of every case on this machine and store them in the records
# (LIBRARY=dolfinx, firedrake or dealii; run it alone: timings are what it measures).
# Same workers as `make demo`: baseline and evaluation then run under the same load.
LIBRARY ?= dolfinx
calibrate: $(STAMP)
	$(VENV)/bin/pdebench calibrate --library $(LIBRARY) --update-cases -- -n $(JOBS)

clean-reports:
	rm -rf reports/runs reports/calibration reports/*.json
