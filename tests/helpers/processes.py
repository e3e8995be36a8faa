"""Ending a process a test started: SIGTERM, then SIGKILL when it does not go in time."""

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
