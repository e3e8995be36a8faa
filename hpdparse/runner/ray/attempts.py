"""How often each work unit was started: a small Ray actor of the run, on the driver's node.

Ray retries a unit whose actor died for as long as it takes (a restarting actor, a lost node do
not count); what counts is an actor *beginning* the unit: the N+1th beginning means N actors
died on it, and the unit is given up (`PageDecoder` reports its unsaved pages as failed). The
book lives on the driver's node, so losing another node does not reset it.
"""

from __future__ import annotations

from typing import Any


class AttemptBook:
    """Unit -> how many times an actor began it."""

    def __init__(self) -> None:
        self._begun: dict[int, int] = {}

    def begin(self, unit: int) -> int:
        """Record that an actor begins `unit`; returns which attempt this is (1 for the first)."""
        self._begun[unit] = self._begun.get(unit, 0) + 1
        return self._begun[unit]


def start_attempt_book(ray: Any) -> Any:
    """A new book (an actor handle) on this (the driver's) node."""
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    here = ray.get_runtime_context().get_node_id()
    book = ray.remote(num_cpus=0)(AttemptBook)
    return book.options(
        scheduling_strategy=NodeAffinitySchedulingStrategy(here, soft=False)
    ).remote()
