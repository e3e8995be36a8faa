"""The run book: what the actors of a `--ray` run tell the driver, kept in a small Ray actor of
the run on the driver's node (losing another node does not reset it).

- **Attempts.** Ray retries a unit whose actor died for as long as it takes (a restarting actor,
  a lost node do not count); what counts is an actor *beginning* the unit: the N+1th beginning
  means N actors died on it, and the unit is given up (`PageDecoder` reports its unsaved pages as
  failed).
- **Heartbeats.** Every engine actor beats every `HEARTBEAT_SECONDS` once its engine is started;
  an actor is alive while it beats. An actor Ray Data lets go (no work left for it) says so and
  is done, not dead. A beat from a new process of a known actor means Ray restarted it. Times
  are the book's own clock, so the nodes' clocks need not agree.
- **The run's life.** The driver ends the book with its run (`end_run_book`). An engine actor that
  Ray starts only after that (one the run asked for while the cluster was full, started once a
  CPU or GPU came free) finds the book gone and exits instead of living on in the cluster.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

HEARTBEAT_SECONDS = 2.0
MISSED_BEATS = 3
"""An actor that has not beaten for this many periods is counted dead (its process is gone, or
Ray lost its node)."""
GOODBYE_SECONDS = 5.0


@dataclass(frozen=True)
class ActorCount:
    """Engine actors alive now, done (let go with no work left), and how many times Ray
    restarted one during the run."""

    alive: int = 0
    restarts: int = 0
    done: int = 0


class RunBook:
    """Unit -> how many times an actor began it; actor -> its process and last beat."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._begun: dict[int, int] = {}
        self._beats: dict[str, tuple[int, float]] = {}  # actor -> (pid, last beat)
        self._left: dict[str, int] = {}  # actor -> the process that said it was done
        self._restarts = 0

    def running(self) -> bool:
        """Answered while the run lasts (the book ends with it)."""
        return True

    def begin(self, unit: int) -> int:
        """Record that an actor begins `unit`; returns which attempt this is (1 for the first)."""
        self._begun[unit] = self._begun.get(unit, 0) + 1
        return self._begun[unit]

    def beat(self, actor: str, pid: int) -> None:
        """Actor `actor` (its process `pid`) is alive."""
        if self._left.get(actor) == pid:  # a beat that crossed the goodbye
            return
        left = self._left.pop(actor, None)
        last_pid = left if left is not None else self._beats.get(actor, (None, 0.0))[0]
        if last_pid is not None and last_pid != pid:
            self._restarts += 1
        self._beats[actor] = (pid, self._clock())

    def leave(self, actor: str, pid: int) -> None:
        """Actor `actor` is done: Ray Data let it go."""
        self._left[actor] = pid
        self._beats.pop(actor, None)

    def actors(self) -> ActorCount:
        deadline = self._clock() - HEARTBEAT_SECONDS * MISSED_BEATS
        alive = sum(1 for _, last in self._beats.values() if last >= deadline)
        return ActorCount(alive, self._restarts, len(self._left))


def start_run_book(ray: Any) -> Any:
    """A new book (an actor handle) on this (the driver's) node."""
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    here = ray.get_runtime_context().get_node_id()
    book = ray.remote(num_cpus=0)(RunBook)
    return book.options(
        scheduling_strategy=NodeAffinitySchedulingStrategy(here, soft=False)
    ).remote()


def end_run_book(ray: Any, book: Any) -> None:
    """Ends the book (the run is over): a late actor's `run_is_over` says so from now on."""
    with contextlib.suppress(Exception):
        ray.kill(book)


def run_is_over(ray: Any, book: Any) -> bool:
    """True when the run this actor was started for has ended (its book is gone)."""
    try:
        ray.get(book.running.remote(), timeout=GOODBYE_SECONDS * 6)
    except ray.exceptions.RayActorError:
        return True
    except Exception:  # a slow book: the run goes on (the driver ends actors it has done with)
        return False
    return False


class Heartbeat:
    """An actor's side of the book: a daemon thread that beats until stopped or the process
    ends. A beat is sent without waiting for it, so a slow book never holds an actor up."""

    def __init__(self, book: Any, actor: str, pid: int) -> None:
        self._book = book
        self._actor = actor
        self._pid = pid
        self._stop = threading.Event()
        threading.Thread(target=self._run, name="hpdparse-heartbeat", daemon=True).start()

    def _run(self) -> None:
        while True:
            with contextlib.suppress(Exception):  # the book is gone: the run is over
                self._book.beat.remote(self._actor, self._pid)
            if self._stop.wait(HEARTBEAT_SECONDS):
                return

    def stop(self) -> None:
        """The actor is let go: no more beats, and the book hears it is done, not dead (waited
        for, briefly: a call still in flight when the process exits would be lost)."""
        self._stop.set()
        with contextlib.suppress(Exception):
            import ray

            ray.get(self._book.leave.remote(self._actor, self._pid), timeout=GOODBYE_SECONDS)
