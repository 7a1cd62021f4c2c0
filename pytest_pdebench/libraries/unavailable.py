"""Tracks whose runners are not built yet (deal.II: issue 5).

Their items are collected (cases declare them) and skip with a message saying what
is missing, rather than pretending to run.
"""

from __future__ import annotations

from . import RuntimeMissing, Track


class DealiiTrack(Track):
    name = "dealii"
    suffixes = (".cpp", ".cc")
    install_hint = "the deal.II track is not implemented yet in this version of pytest-pdebench"

    def detect(self):
        raise RuntimeMissing(self.install_hint)
