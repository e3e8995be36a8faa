"""The document service's durable store: one folder per accepted document under --store.

    STORE/documents/<id>/job.json    the document's record (`DocumentJob`), written atomically
    STORE/documents/<id>/input/NAME  the uploaded file, under its own name made safe
    STORE/documents/<id>/out/        what `hpdparse convert` writes for it (out/<stem>/...)
    STORE/documents/<id>/result.zip  the zip of the document's folder, made on first request
    STORE/converted/                 the PDFs of Office and HTML uploads (by content digest)

A folder without job.json is an upload that never completed (the server was killed while it
arrived) and is removed when the store opens. Secrets never reach the store: a document's
password stays in memory, and its owner is a digest of the caller's API key.
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import hashlib
import json
import re
import secrets
import shutil
import threading
import time
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hpdparse.errors import HpdparseError
from hpdparse.serve.documents.options import DocumentOptions
from hpdparse.store.atomic import atomic_write_json

QUEUED, RUNNING, DONE, FAILED, CANCELLED = "queued", "running", "done", "failed", "cancelled"
FINAL = frozenset({DONE, FAILED, CANCELLED})
STATUSES = (QUEUED, RUNNING, DONE, FAILED, CANCELLED)
JOB_FILE = "job.json"
_ID = re.compile(r"^[0-9a-f]{24}$")


def owner_of(api_key: str | None) -> str:
    """Whose documents a caller sees: a digest of its API key ("" on a server without keys)."""
    return hashlib.sha256(api_key.encode()).hexdigest()[:32] if api_key else ""


def safe_name(name: str | None) -> str:
    """An uploaded file's name as a file name: its last path part, without control characters
    or a leading dot, at most 200 characters; "document" when nothing is left."""
    base = re.split(r"[/\\]", name or "")[-1]
    base = unicodedata.normalize("NFC", base)
    base = "".join(c for c in base if unicodedata.category(c)[0] != "C")
    base = base.strip().lstrip(".").strip()
    if len(base) > 200:
        stem, dot, suffix = base.rpartition(".")
        base = (stem[:190] + dot + suffix[:9]) if dot and len(suffix) < 10 else base[:200]
    return base or "document"


@dataclass
class DocumentJob:
    """One accepted document: what was asked and where it stands (job.json)."""

    id: str
    name: str  # the file's name as the caller gave it (or the URL)
    owner: str
    options: DocumentOptions
    source: str  # the upload's file name in input/, or the URL
    created: float
    status: str = QUEUED
    started: float | None = None
    finished: float | None = None
    pages_total: int = 0
    pages_done: int = 0
    pages_failed: int = 0
    error: str | None = None
    # The run report's entry for the document once it ends (status, timings, tokens,
    # confidence): what `hpdparse convert --report` writes for it.
    report: dict[str, object] | None = None
    stem: str | None = None  # the output folder's name, out/<stem>/
    version: int = field(default=0, compare=False)  # +1 at each change (events)

    @property
    def is_url(self) -> bool:
        return "://" in self.source

    def to_json(self) -> dict[str, object]:
        data = dataclasses.asdict(self)
        del data["version"]
        data["options"] = self.options.to_json()
        return data

    @classmethod
    def from_json(cls, data: Any) -> DocumentJob:
        values = {f.name: data[f.name] for f in dataclasses.fields(cls) if f.name in data}
        values["options"] = DocumentOptions.from_json(data.get("options") or {})
        return cls(**values)

    def status_body(self) -> dict[str, object]:
        """What GET /v1/documents/{id} answers."""
        body = self.to_json()
        del body["owner"], body["source"]
        body["pages"] = {key: body.pop(f"pages_{key}") for key in ("total", "done", "failed")}
        return body


class DocumentStore:
    """The documents under `root` (see the module doc); thread-safe."""

    def __init__(self, root: Path) -> None:
        # absolute: a failed document's error names its upload, found by its path in it
        self.root = Path(root).expanduser().resolve()
        self.documents = self.root / "documents"
        self.converted = self.root / "converted"
        try:
            self.documents.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise HpdparseError(f"cannot use {self.root} as the store: {exc.strerror}") from None
        self._lock = threading.Lock()
        self._jobs: dict[str, DocumentJob] = {}
        self._writing: dict[str, threading.Lock] = {}  # by id: one record's writes in turn
        self._size_at: tuple[float, int] = (0.0, 0)
        self.load()

    # ------------------------------------------------------------------ paths
    def folder(self, job_id: str) -> Path:
        return self.documents / job_id

    def input_path(self, job: DocumentJob) -> Path:
        return self.folder(job.id) / "input" / job.source

    def output_dir(self, job: DocumentJob) -> Path:
        return self.folder(job.id) / "out"

    def document_dir(self, job: DocumentJob) -> Path | None:
        """The document's output folder (out/<stem>), once its run has named it."""
        return None if job.stem is None else self.output_dir(job) / job.stem

    # ------------------------------------------------------------------ records
    def load(self) -> list[DocumentJob]:
        """Read every record; remove uploads that never completed (a folder without its
        record, and what a killed server was still receiving). Oldest first."""
        for spool in self.root.glob("incoming-*"):
            shutil.rmtree(spool, ignore_errors=True)
        jobs = []
        for folder in sorted(self.documents.iterdir()):
            record = folder / JOB_FILE
            if not _ID.match(folder.name) or not record.is_file():
                shutil.rmtree(folder, ignore_errors=True)
                continue
            try:
                jobs.append(DocumentJob.from_json(json.loads(record.read_text("utf-8"))))
            except (OSError, ValueError, KeyError, TypeError) as exc:
                raise HpdparseError(f"{record}: not a document record ({exc})") from None
        jobs.sort(key=_created)
        with self._lock:
            self._jobs = {job.id: job for job in jobs}
        return jobs

    def new_id(self) -> str:
        while True:
            job_id = secrets.token_hex(12)
            if not self.folder(job_id).exists():
                return job_id

    def accept(self, job: DocumentJob, upload: Path | None) -> None:
        """Keep a new document: its upload (moved from `upload`) first, its record last."""
        folder = self.folder(job.id)
        (folder / "input").mkdir(parents=True)
        if upload is not None:
            shutil.move(upload, self.input_path(job))
        self.save(job)

    def save(self, job: DocumentJob) -> None:
        """Write the record (atomically) after a change; `version` tells the event streams."""
        with self._lock:
            job.version += 1
            self._jobs[job.id] = job
            writing = self._writing.setdefault(job.id, threading.Lock())
        # Written outside the store's lock, so that readers (the HTTP routes) never wait on a disk
        # and the records of different documents are synced at once; one record's lock keeps its
        # writes in order, the last with the newest state.
        with writing:
            atomic_write_json(self.folder(job.id) / JOB_FILE, job.to_json())

    def touch(self, job: DocumentJob) -> None:
        """A change the event streams see at once and job.json at the next `save`."""
        with self._lock:
            job.version += 1

    def counts(self) -> dict[str, int]:
        """How many documents have each status (every status, 0 included)."""
        with self._lock:
            counted = collections.Counter(job.status for job in self._jobs.values())
        return {status: counted[status] for status in STATUSES}

    def unfinished(self) -> list[DocumentJob]:
        """The documents not ended (queued or running when the last server stopped), oldest
        first."""
        return sorted(self._where(lambda job: job.status not in FINAL), key=_created)

    def get(self, job_id: str, owner: str) -> DocumentJob | None:
        with self._lock:
            job = self._jobs.get(job_id)
        return job if job is not None and job.owner == owner else None

    def listed(self, owner: str) -> list[DocumentJob]:
        """The owner's documents, newest first."""
        return sorted(self._where(lambda job: job.owner == owner), key=_created, reverse=True)

    def _where(self, keep: Callable[[DocumentJob], bool]) -> list[DocumentJob]:
        with self._lock:
            return [job for job in self._jobs.values() if keep(job)]

    def delete(self, job: DocumentJob) -> None:
        with self._lock:
            self._jobs.pop(job.id, None)
            self._writing.pop(job.id, None)
        shutil.rmtree(self.folder(job.id), ignore_errors=True)
        self._size_at = (0.0, 0)

    def expire(self, keep_seconds: float) -> None:
        """Remove the documents that ended more than `keep_seconds` ago."""
        since = time.time() - keep_seconds
        for job in self._where(lambda job: job.status in FINAL):
            if (job.finished or job.created) < since:
                self.delete(job)

    def size(self) -> int:
        """Bytes the store holds (counted at most every 5 s)."""
        at, size = self._size_at
        if time.monotonic() - at > 5:
            size = sum(p.stat().st_size for p in self.root.rglob("*") if _is_file(p))
            self._size_at = (time.monotonic(), size)
        return size

    def added(self, size: int) -> None:
        at, known = self._size_at
        self._size_at = (at, known + size)


def _created(job: DocumentJob) -> float:
    return job.created


def _is_file(path: Path) -> bool:
    with contextlib.suppress(OSError):
        return path.is_file()
    return False
