"""The warning category of the benchmark's notices (a loosened gate, a path an agent will
not see, a case without calibration): one class, importable from every layer."""


class PdeBenchWarning(UserWarning):
    """A notice of pytest-pdebench: shown in pytest's warnings summary."""
