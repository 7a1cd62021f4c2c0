"""``--pde-cluster``: the runs of every item on the workers of a Dask cluster.

The pytest session stays the controller: it collects, calls models, holds the references,
thresholds and calibrations, judges and reports. A worker receives a ``RunTask`` (the
agent view, the submission's files, the limits: ``execution.py``) and returns an
``Execution`` (logs, the outputs' bytes, timings, its machine key); it never sees an
answer.

The two sides live apart: ``worker`` is what runs in the workers' processes (Dask pickles
its functions by module path, so it imports nothing of the controller), ``controller``
what runs in the pytest session. A loopback cluster for tests and benchmarks is test
support: ``pytest_pdebench.testing.loopback``.
"""
