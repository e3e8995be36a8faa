"""A progress for `--ray` tests that keeps the "actors alive" figures the driver showed."""

from __future__ import annotations

from hpdparse.runner.progress import Progress


class ActorFigures(Progress):
    """Quiet, but keeps every (alive, wanted, restarts, done) the driver showed, in order."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[tuple[int, int, int, int]] = []

    def actors_alive(self, alive: int, wanted: int, restarts: int = 0, done: int = 0) -> None:
        self.seen.append((alive, wanted, restarts, done))
