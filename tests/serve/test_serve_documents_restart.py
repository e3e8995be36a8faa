"""The document store outlives `hpdparse serve`: a server killed (SIGKILL) in the middle of a
document, or stopped (SIGTERM), and started again on the same --store finishes the document
without decoding its saved pages again, gives convert's files, and still serves the documents
finished before. Real servers (torch engine, tiny checkpoint), four pages decoded at a time so that
a document is caught halfway.
"""

from __future__ import annotations

import json
import signal
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("starlette")
pytest.importorskip("docling_core")

from tests.helpers.convert_outputs import SERVICE_OPTIONS, comparable_files
from tests.helpers.documents_client import DocumentsClient
from tests.helpers.paths import SAMPLES
from tests.helpers.patience import wait_until
from tests.helpers.processes import descendants, is_running
from tests.helpers.serving import Served, serve_process

SERVER = ["--engine", "torch", "--device", "cpu", "--port", "0", "--batch-size", "4"]
LONG_PAGES = 24
RESULTS = {"markdown": "{}.md", "json": "{}.json", "docling": "{}.docling.json"}
RESULTS["chunks"] = "{}.chunks.jsonl"


def _serve(store: Path, log: Path):
    return serve_process([*SERVER, "--store", str(store)], log)


def _record(store: Path, doc_id: str) -> dict:
    return json.loads((store / "documents" / doc_id / "job.json").read_text("utf-8"))


def _saved_pages(store: Path, doc_id: str) -> int:
    """How many of the long document's pages are on disk (both raw files written)."""
    raw = store / "documents" / doc_id / "out" / "long" / "raw"
    return sum(meta.with_suffix(".txt").is_file() for meta in raw.glob("page-*.json"))


def _half_done(served: Served, store: Path, long_pdf: Path) -> tuple[str, int]:
    """Upload the long document and wait until some of its pages are done and saved: (its id,
    how many are done)."""
    docs = DocumentsClient(served)
    try:
        (doc_id,) = docs.upload_ids([long_pdf], **SERVICE_OPTIONS)
        body = docs.wait_for_pages(doc_id)
    finally:
        docs.close()
    assert body["pages"]["total"] == LONG_PAGES
    # a page counts as done once decoded; its files are written a moment later
    wait_until(lambda: _saved_pages(store, doc_id) > 0, "a page of the long document on disk")
    return doc_id, body["pages"]["done"]


def _check_finished(docs: DocumentsClient, doc_id: str, saved: int, converted: Path) -> None:
    """The document ends done, having decoded only the `saved` pages not saved before, with
    convert's files."""
    body = docs.wait(doc_id)
    assert body["status"] == "done", body
    report = body["report"]
    assert report["pages_reused"] == saved > 0, report
    assert report["pages_reused"] + report["pages_decoded"] == LONG_PAGES, report
    assert report["pages_reused"] < LONG_PAGES, report  # it was caught halfway
    got = {name.format("long"): docs.result(doc_id, wanted) for wanted, name in RESULTS.items()}
    expected = comparable_files(
        {name: (converted / "long" / name).read_bytes() for name in got}, "long"
    )
    assert comparable_files(got, "long") == expected


def test_a_killed_server_finishes_the_document_after_a_restart(
    tmp_path: Path, long_pdf: Path, converted: Path
) -> None:
    store = tmp_path / "store"
    with _serve(store, tmp_path / "first.txt") as first:
        docs = DocumentsClient(first)
        (memo_id,) = docs.upload_ids([SAMPLES / "memo.pdf"], **SERVICE_OPTIONS)
        assert docs.wait(memo_id)["status"] == "done"
        docs.close()
        doc_id, _ = _half_done(first, store, long_pdf)
        children = descendants(first.proc.pid)
        assert children  # the rasterizer processes
        first.proc.send_signal(signal.SIGKILL)
        assert first.proc.wait(60) == -signal.SIGKILL
    # the workers go with the server; its record says where the document was
    wait_until(lambda: not any(map(is_running, children)), "the killed server's processes")
    assert _record(store, doc_id)["status"] == "running"
    saved = _saved_pages(store, doc_id)  # what the killed server had written

    with _serve(store, tmp_path / "second.txt") as second:
        docs = DocumentsClient(second)
        try:
            _check_finished(docs, doc_id, saved, converted)
            memo = docs.status(memo_id)
            assert memo["status"] == "done" and memo["report"]["pages_decoded"] == 1
            assert docs.result(memo_id, "markdown") == (converted / "memo" / "memo.md").read_bytes()
            listed = [body["id"] for body in docs.listing()["documents"]]
            assert listed == [doc_id, memo_id]
        finally:
            docs.close()


def test_a_stopped_server_leaves_the_document_queued_for_the_next(
    tmp_path: Path, long_pdf: Path, converted: Path
) -> None:
    store = tmp_path / "store"
    with _serve(store, tmp_path / "first.txt") as first:
        doc_id, done = _half_done(first, store, long_pdf)
        assert first.stop() == 0
    record = _record(store, doc_id)
    assert record["status"] == "queued", record
    saved = _saved_pages(store, doc_id)  # a stopped server writes the pages it had decoded
    assert record["pages_done"] >= saved >= done

    with _serve(store, tmp_path / "second.txt") as second:
        docs = DocumentsClient(second)
        try:
            _check_finished(docs, doc_id, saved, converted)
        finally:
            docs.close()
