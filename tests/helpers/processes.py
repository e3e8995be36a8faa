"""Processes a test started: ending one (SIGTERM, then SIGKILL when it does not go in time), and
what a worker process has imported."""

from __future__ import annotations

import subprocess


def stop_process(proc: subprocess.Popen, grace: float = 60) -> None:
    if proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(grace)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def loaded_modules(names: list[str]) -> list[str]:
    """Those of `names` imported in the process this runs in (a worker-pool task: what its
    worker started with)."""
    import sys

    return [name for name in names if name in sys.modules]
