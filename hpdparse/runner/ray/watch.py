"""Threads that watch a `--ray` run from the driver while its main thread waits for rows:
`actors_watched` shows the engine actors alive, `StallWatch` ends a run no page comes back to."""

from __future__ import annotations

import _thread
import contextlib
import threading
import time
from collections.abc import Iterator
from typing import Any

from hpdparse.runner.progress import Progress
from hpdparse.runner.ray.run_book import HEARTBEAT_SECONDS, ActorCount

ASK_TIMEOUT_SECONDS = 10.0


@contextlib.contextmanager
def actors_watched(ray: Any, book: Any, progress: Progress, wanted: int) -> Iterator[None]:
    """While the block runs, asks the run book how many engine actors are alive (restarted,
    done) and tells the progress when a figure changes, and once more as the run ends."""
    stop = threading.Event()

    def watch() -> None:
        shown: ActorCount | None = None
        stopping = False
        while not stopping:
            stopping = stop.wait(HEARTBEAT_SECONDS / 2)  # a last look when the run ends
            try:
                count = ray.get(book.actors.remote(), timeout=ASK_TIMEOUT_SECONDS)
            except Exception:  # a book that did not answer in time: ask again
                continue
            if count != shown:
                shown = count
                progress.actors_alive(count.alive, wanted, count.restarts, count.done)

    thread = threading.Thread(target=watch, name="hpdparse-actors", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(timeout=ASK_TIMEOUT_SECONDS)


class StallWatch:
    """Interrupts the main thread when no row came for `seconds` (0: never), so that a stuck
    cluster (no actor can start, a lost node never replaced) ends the run instead of hanging."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.last = time.monotonic()
        self.fired = False
        self._stop = threading.Event()

    def __enter__(self) -> StallWatch:
        self.last = time.monotonic()
        if self.seconds > 0:
            threading.Thread(target=self._watch, name="hpdparse-stall", daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()

    def _watch(self) -> None:
        while not self._stop.wait(min(1.0, self.seconds / 4)):
            if time.monotonic() - self.last > self.seconds:
                self.fired = True
                _thread.interrupt_main()
                return
