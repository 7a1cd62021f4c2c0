"""``python -m pytest_pdebench.cli``: the ``pdebench`` command."""

from . import main

raise SystemExit(main())
