"""`pdebench report`: the paper's tables and figures from stored runs.

``runs.py`` reads stored runs into rows, ``stats.py`` has the statistics, ``tables.py``
the analyses (tables of numbers, re-gating with other alphas), ``figures.py`` the plots
and ``render.py`` the report folder (Markdown, HTML, JSON, CSV, LaTeX).
``calibration_summary.py`` (`pdebench calibration-summary`) looks at a machine's
calibration itself, before any run is judged with it.
"""
