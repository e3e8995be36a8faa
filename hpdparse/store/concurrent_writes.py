"""`ConcurrentWrites`: a document folder's writes on a few threads, so that whoever produces the
data (the runner's loop taking the engine's results, the figure cutter) never waits for the store.

On an object store a request takes tens of milliseconds, mostly waiting; one after the other,
a page's objects cost the run that much time each. Here they go out together, at most
`WRITE_THREADS` at a time, and at most 4 x `WRITE_THREADS` wait their turn (`submit` blocks
beyond that, so the data held in memory stays bounded). Writes are grouped by an owner (a
document, a page): `settle(owner)` waits for all of that owner's writes and says why one failed,
so a caller writes a document's last file (its .md) only after all the others are written. Each
write is still atomic (one PUT, or the local store's temporary file and rename).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable
from concurrent.futures import Future, ThreadPoolExecutor

WRITE_THREADS = 8
"""Writes under way at once: enough to hide an object store's latency, few enough not to matter
to a local disk."""


class ConcurrentWrites:
    """Writes (functions that raise OSError when they fail) run on `threads` threads."""

    def __init__(self, threads: int = WRITE_THREADS) -> None:
        self._pool = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="hpdparse-write")
        self._room = threading.BoundedSemaphore(4 * threads)
        self._writes: dict[Hashable, list[Future[None]]] = {}

    def __enter__(self) -> ConcurrentWrites:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def submit(self, owner: Hashable, write: Callable[[], None]) -> None:
        """Run `write` in the background, as one of `owner`'s writes."""
        self._room.acquire()
        try:
            future = self._pool.submit(write)
        except BaseException:
            self._room.release()
            raise
        future.add_done_callback(lambda _: self._room.release())
        self._writes.setdefault(owner, []).append(future)

    def failure(self, owner: Hashable) -> str | None:
        """Why one of `owner`'s writes already failed (an OSError's strerror), without waiting;
        None when none has failed so far."""
        pending = []
        for future in self._writes.get(owner, []):
            if not future.done():
                pending.append(future)
            elif (reason := _reason(future)) is not None:
                return reason
        if owner in self._writes:
            self._writes[owner] = pending  # the writes done well need no more looking at
        return None

    def settle(self, owner: Hashable) -> str | None:
        """Wait for every write of `owner`; why the first failed one failed, or None."""
        reasons = [_reason(future) for future in self._writes.pop(owner, [])]
        return next((reason for reason in reasons if reason is not None), None)

    def close(self) -> None:
        """Wait for the writes under way (data produced is data kept), then stop the threads."""
        self._pool.shutdown(wait=True)


def _reason(future: Future[None]) -> str | None:
    exc = future.exception()
    if exc is None:
        return None
    if isinstance(exc, OSError):
        return exc.strerror or str(exc)
    raise exc
