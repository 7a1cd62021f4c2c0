# Two commands do everything on a fresh machine:
#   make demo   set up, then run the bundled DOLFINx oracle on the bundled cases
#   make test   set up, then run the project's own test suite
# (make check: its quick tier, the tests marked docker, cluster, firedrake or slow left out)
VENV ?= .venv
STAMP := $(VENV)/.pdebench-setup
JOBS ?= 2

.PHONY: setup demo test check calibrate clean-reports

setup: $(STAMP)

$(STAMP): pyproject.toml scripts/setup.sh
	PDEBENCH_VENV=$(VENV) scripts/setup.sh
	touch $@

demo: $(STAMP)
	$(VENV)/bin/pytest --pde-library=dolfinx --pde-submissions=submissions/oracle -n $(JOBS) \
		--json-report --json-report-file=reports/demo.json

test: $(STAMP)
	PDEBENCH_REQUIRE_FEM=1 $(VENV)/bin/pytest

# under 3 minutes on 2 shared cores; the markers are given in tests/conftest.py
check: $(STAMP)
	$(VENV)/bin/pytest -m "not (docker or cluster or firedrake or slow or alone)" -q -n $(JOBS)
	$(VENV)/bin/pytest -m "alone and not (docker or cluster or firedrake or slow)" -q

# measure e_base/t_base of every case on this machine and store them in the records
# (LIBRARY=dolfinx, firedrake or dealii; run it alone: timings are what it measures).
# Same workers as `make demo`: baseline and evaluation then run under the same load.
LIBRARY ?= dolfinx
calibrate: $(STAMP)
	$(VENV)/bin/pdebench calibrate --library $(LIBRARY) --update-cases -- -n $(JOBS)

clean-reports:
	rm -rf reports/runs reports/calibration reports/*.json
