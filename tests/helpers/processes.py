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


def descendants(pid: int) -> list[int]:
    """The processes under `pid` (children, theirs, ...), read from /proc (Linux)."""
    import os

    parents: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", encoding="ascii", errors="replace") as stat:
                ppid = int(stat.read().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        parents.setdefault(ppid, []).append(int(entry))
    found, todo = [], [pid]
    while todo:
        children = parents.get(todo.pop(), [])
        found += children
        todo += children
    return found


def is_running(pid: int) -> bool:
    """Whether `pid` is a live process (a zombie is not)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False
