"""Running `hpdparse` as users do (a subprocess, the environment of the S3 fixture) and
comparing a bucket's output with a local one."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.helpers.paths import REPO

# Fields that differ between any two runs, or between a source on disk and one in a bucket.
_TIMING = {"seconds"}
_SOURCE_IDENTITY = {"source", "source_size", "source_mtime_ns"}


def hpdparse(*args: str, env: dict[str, str] | None = None, timeout: float = 600):
    """Run `python -m hpdparse ARGS`; the CompletedProcess (text)."""
    return subprocess.run(
        [sys.executable, "-m", "hpdparse", *args],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=timeout,
        env={**os.environ, "OMP_NUM_THREADS": "1", **(env or {})},
        check=False,
    )


def popen_hpdparse(*args: str, env: dict[str, str] | None = None) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "hpdparse", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=REPO,
        env={**os.environ, "OMP_NUM_THREADS": "1", **(env or {})},
    )


def tree_files(root: Path) -> dict[str, bytes]:
    return {
        p.relative_to(root).as_posix(): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def _normalised(name: str, data: bytes) -> Any:
    """What must be equal in file `name` (relative to OUT): the bytes, except that raw page
    records drop their timing and the document's JSON and resume state drop where the source
    was (a path here, a URL there; its sha256 stays)."""
    if not name.endswith(".json"):
        return data
    record = _without_timing(json.loads(data))
    if name.endswith("/raw/document.json"):
        return {k: v for k, v in record.items() if k not in _SOURCE_IDENTITY}
    return {k: v for k, v in record.items() if k != "source"}


def _without_timing(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _without_timing(v) for k, v in value.items() if k not in _TIMING}
    if isinstance(value, list):
        return [_without_timing(v) for v in value]
    return value


def assert_same_output(local: Path, bucket_copy: Path) -> None:
    """The same files with the same content, as `_normalised` says."""
    ours, theirs = tree_files(local), tree_files(bucket_copy)
    assert sorted(ours) == sorted(theirs)
    for name, data in ours.items():
        assert _normalised(name, data) == _normalised(name, theirs[name]), name
