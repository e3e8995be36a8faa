"""The document store on a real folder: what a killed server leaves behind is gone when the next
one opens the store."""

from __future__ import annotations

from pathlib import Path

from hpdparse.serve.documents.options import DocumentOptions
from hpdparse.serve.documents.store import DocumentJob, DocumentStore


def test_load_removes_what_a_killed_server_was_receiving(tmp_path: Path) -> None:
    store = DocumentStore(tmp_path)
    kept = DocumentJob(store.new_id(), "a.pdf", "", DocumentOptions(), "a.pdf", 1.0)
    upload = tmp_path / "a.pdf"
    upload.write_bytes(b"%PDF-1.4")
    store.accept(kept, upload)
    # a killed server's leftovers: an upload still arriving, a document without its record
    arriving = tmp_path / "incoming-x1y2" / "0" / "big.pdf"
    arriving.parent.mkdir(parents=True)
    arriving.write_bytes(b"x" * 1000)
    unrecorded = store.folder(store.new_id()) / "input"
    unrecorded.mkdir(parents=True)

    jobs = DocumentStore(tmp_path).load()

    assert [job.id for job in jobs] == [kept.id]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["documents"]
    assert [p.name for p in (tmp_path / "documents").iterdir()] == [kept.id]
    assert store.input_path(kept).read_bytes() == b"%PDF-1.4"
