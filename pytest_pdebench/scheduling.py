"""``--pde-cluster``: the runs of items whose submission needs no generation (a folder of
solvers) are sent to the workers ahead of their turn, in item order, keeping
``cluster.ahead`` in flight: the workers stay busy while the controller judges, and the
results waiting on them stay bounded. An item whose turn comes takes what was sent for it
(or sends it then); an item that ends without taking its runs has them cancelled.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .evaluation import run_task, will_run
from .libraries import RuntimeMissing
from .placement import NoCalibration, NotVaried, Placement, say
from .plan import ItemPlan
from .sources import NotRun, Source

if TYPE_CHECKING:
    from .cluster.controller import Cluster


class RunAhead:
    def __init__(self, cluster: Cluster, source: Source, placement: Placement):
        self.cluster, self.source, self.placement = cluster, source, placement
        self._queued: list = []  # (record, library, machine, case_dir) of the items, in order
        self._position: dict = {}  # (case id, library, machine) -> index in _queued
        self._next = 0  # the next to send
        self._plans: dict[tuple, ItemPlan] = {}  # plans made to send runs ahead, until their item's turn

    def prefetch(self, items) -> None:
        """Queue the collected case items and send the first runs."""
        if not getattr(self.source, "prefetchable", False):
            return
        self._queued = [
            (item.record, item.library, item.machine, item.path.parent) for item in items if hasattr(item, "record")
        ]
        self._position = {
            (record.id, library, machine): k for k, (record, library, machine, _) in enumerate(self._queued)
        }
        self.top_up()

    def plan_of(self, case_id: str, library: str, machine: str | None) -> ItemPlan | None:
        """The plan made for an item whose runs were sent ahead (planned once: the item takes
        it, and the warnings it kept are said now), or None."""
        plan = self._plans.pop((case_id, library, machine), None)
        if plan is not None:
            say(plan.notes)
        return plan

    def turn_of(self, plan: ItemPlan) -> None:
        """The item whose turn it is will not be sent ahead again (if it was not yet, its own
        evaluation sends it now); the queue goes on after it."""
        position = self._position.get(plan.key)
        if position is not None and position >= self._next:
            self._next = position + 1

    def done_with(self, plan: ItemPlan) -> None:
        """The item has its verdict: runs sent ahead that it never took are cancelled, and
        the queue is topped up."""
        self.cluster.discard(plan.library, plan.record.id)
        self.top_up()

    def top_up(self) -> int:
        """Send queued items until ``cluster.ahead`` runs are in flight; returns how many."""
        sent = 0
        while self._next < len(self._queued) and self.cluster.in_flight() < self.cluster.ahead:
            record, library, machine, case_dir = self._queued[self._next]
            self._next += 1
            try:
                plan = self.placement.plan(record, library, case_dir, machine, quiet=True)
                self.placement.settings.runtime(library)
            except (NoCalibration, NotVaried, NotRun, RuntimeMissing):
                continue  # the item says why itself
            self._plans[(record.id, library, machine)] = plan
            draft = self.source.draft(plan, 1, None)
            if draft.submission is None:
                continue
            if will_run(plan, draft.submission, self.placement.settings):
                # ignore: a plan placed on a cluster has the cluster's executor, which sends ahead
                plan.executor.send(run_task(plan, draft.submission, self.placement.settings))  # type: ignore[union-attr]
                sent += 1
        return sent
