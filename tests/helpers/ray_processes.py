"""The Ray actor processes a test started: Ray's worker processes below this process (the
session cluster's raylet is its child) whose title names the `--ray` run's actor class."""

from __future__ import annotations

import time

import psutil

ACTOR_TITLE = "ray::MapWorker(MapBatches(PageDecoder))"


def decoder_actor_pids(serving_port: int | None = None) -> list[int]:
    """Pids of the PageDecoder actors running under this process; with `serving_port`, only
    those with a connection open to that local port: actors of the run that talks to that
    server, never an actor of an earlier run still exiting (its title is the same)."""
    pids = []
    for child in psutil.Process().children(recursive=True):
        try:
            title = " ".join(child.cmdline())
            if not title.startswith(ACTOR_TITLE):
                continue
            if serving_port is None or any(
                conn.raddr and conn.raddr.port == serving_port
                for conn in child.net_connections(kind="tcp")
            ):
                pids.append(child.pid)
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
    return pids


def wait_for_no_decoder_actors(timeout: float) -> bool:
    """True once no PageDecoder actor runs under this process (within `timeout` seconds)."""
    deadline = time.monotonic() + timeout
    while decoder_actor_pids():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.2)
    return True
