"""`hpdparse convert` on the tiny checkpoint (torch engine, CPU), the reference the document
service's files are compared with, and the comparison itself.

The service runs convert's own runner, so a document's files are convert's byte for byte except
what tells where and when the input was read and how long pages took; `comparable` blanks exactly
those keys (found by diffing a service run against a convert run of the samples):

    <stem>.json          "source" (the upload's path in the store), each page's "seconds"
    raw/document.json    "source", "source_mtime_ns"
    raw/page-NNNN.json   "seconds"
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.helpers.paths import REPO, TINY

CONVERT = [sys.executable, "-m", "hpdparse", "convert", "--engine", "torch", "--device", "cpu"]
CONVERT += ["--model", str(TINY)]  # as serve_process gives it: the files name the model
# The options every document test converts with, as convert's flags and the service's fields.
CONVERT_OPTIONS = ("--docling", "--chunks")
SERVICE_OPTIONS = {"docling": "true", "chunks": "true"}
_PAGE_RECORD = re.compile(r"^raw/page-\d+\.json$")


def run_convert(inputs: list[Path], out: Path, *options: str) -> subprocess.CompletedProcess:
    """`hpdparse convert INPUTS -o OUT OPTIONS`; its exit status is the caller's to check."""
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    cmd = [*CONVERT, *map(str, inputs), "-o", str(out), *options]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=900, cwd=REPO, env=env)


def convert_errors(stderr: str) -> dict[str, str]:
    """The one-line errors convert printed ("error: PATH: MESSAGE"), MESSAGE by PATH's name."""
    errors = {}
    for line in stderr.splitlines():
        if line.startswith("error: "):
            path, _, message = line.removeprefix("error: ").partition(": ")
            errors[Path(path).name] = message
    return errors


def folder_files(doc_dir: Path) -> dict[str, bytes]:
    """Every file under a document's folder: its path there (posix) -> its bytes."""
    return {
        path.relative_to(doc_dir).as_posix(): path.read_bytes()
        for path in sorted(doc_dir.rglob("*"))
        if path.is_file()
    }


def comparable(rel: str, content: bytes, stem: str) -> bytes | dict[str, Any]:
    """The file at `rel` in document `stem`'s folder as compared: its bytes, or for the three
    JSON records named in the module doc, its data with those keys set to None."""
    if rel == f"{stem}.json":
        data = json.loads(content)
        data["source"] = None
        for page in data["pages"]:
            page["seconds"] = None
        return data
    if rel == "raw/document.json":
        data = json.loads(content)
        data["source"] = data["source_mtime_ns"] = None
        return data
    if _PAGE_RECORD.match(rel):
        data = json.loads(content)
        data["seconds"] = None
        return data
    return content


def comparable_files(files: dict[str, bytes], stem: str) -> dict[str, bytes | dict[str, Any]]:
    return {rel: comparable(rel, content, stem) for rel, content in files.items()}
