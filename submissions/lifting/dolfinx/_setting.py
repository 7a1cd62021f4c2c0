"""The lifting rung's setting: the textbook's mesh and element, lifted. benchmarks/lifting_gain.py
writes its own beside a copy of solver.py to compare plain and lifted solves."""

CELLS_2D, CELLS_3D, DEGREE, LIFT = 64, 16, 1, True
