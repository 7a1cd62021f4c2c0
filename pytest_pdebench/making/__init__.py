"""How a case is made: manufactured solutions (sympy), the hiding of the answer in the data,
the suite's designs, a record's solve-only part, the oracle's refinement runs and the
ansatz-fit attacker every build keeps its margin from.

Shared by the offline builds (``authoring/``: the suite's files) and by the live variants a
run draws (``live_variants.py``); nothing here writes the suite.
"""
