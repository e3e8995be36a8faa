"""The Ray actor processes a test started: Ray's worker processes below this process (the
session cluster's raylet is its child) whose title names the `--ray` run's actor class."""

from __future__ import annotations

import time

import psutil

ACTOR_TITLE = "ray::MapWorker(MapBatches(PageDecoder))"


def decoder_actor_pids() -> list[int]:
    """Pids of the PageDecoder actors running under this process (only this test's)."""
    pids = []
    for child in psutil.Process().children(recursive=True):
        try:
            title = " ".join(child.cmdline())
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
        if title.startswith(ACTOR_TITLE):
            pids.append(child.pid)
    return pids


def wait_for_no_decoder_actors(timeout: float) -> bool:
    """True once no PageDecoder actor runs under this process (within `timeout` seconds)."""
    deadline = time.monotonic() + timeout
    while decoder_actor_pids():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.2)
    return True
