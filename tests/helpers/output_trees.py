"""Comparing output folders: every file's bytes, except the timing fields of the JSON files
(`seconds`: how long a page took differs from run to run, nothing else may)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from hpdparse.store.output_store import open_document_folder

TIMING_KEYS = {"seconds"}


def _without_timings(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _without_timings(v) for k, v in value.items() if k not in TIMING_KEYS}
    if isinstance(value, list):
        return [_without_timings(v) for v in value]
    return value


def tree_snapshot(out: Path) -> dict[str, bytes]:
    """Relative path -> content of every file under `out`; JSON files without timing fields."""
    files = {}
    for path in sorted(out.rglob("*")):
        if not path.is_file():
            continue
        rel = str(path.relative_to(out))
        if path.suffix == ".json":
            data = _without_timings(json.loads(path.read_text(encoding="utf-8")))
            files[rel] = json.dumps(data, sort_keys=True).encode()
        else:
            files[rel] = path.read_bytes()
    return files


def valid_pages(doc_dir: Path, pages: int) -> set[int]:
    """The page numbers whose raw record in `doc_dir` is valid (saved and committed)."""
    if not doc_dir.is_dir():
        return set()
    folder = open_document_folder(doc_dir)
    return {n for n in range(1, pages + 1) if folder.read_raw_page(n) is not None}
