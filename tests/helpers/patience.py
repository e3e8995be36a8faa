"""How long a test waits for something that must happen (a page saved, a process gone, a run
over): a safety net that ends a broken test instead of hanging it, never what the test checks.
Generous, so that a busy machine (another test run, a benchmark; Ray runs its workers at nice 15)
does not fail a test: when it is reached, the test has failed whatever the machine's speed."""

from __future__ import annotations

import time
from collections.abc import Callable

PATIENCE_SECONDS = 900.0


def wait_until(
    condition: Callable[[], object], what: str, timeout: float = PATIENCE_SECONDS
) -> None:
    """Returns once `condition()` is true; fails the test after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)
