"""`ConcurrentWrites` on real local folders: writes grouped by owner, `settle` waits for all of an
owner's writes and gives the reason one failed (one line, an OSError's strerror)."""

from __future__ import annotations

from pathlib import Path

from hpdparse.store.concurrent_writes import ConcurrentWrites
from hpdparse.store.output_store import open_document_folder


def test_settle_waits_for_an_owners_writes_and_reports_its_failure(tmp_path: Path) -> None:
    good = open_document_folder(tmp_path / "good")
    (tmp_path / "blocked").write_text("a file where the folder should be")
    blocked = open_document_folder(tmp_path / "blocked")
    with ConcurrentWrites(threads=2) as writes:
        for n in range(40):  # more than the 8 that may wait: submit blocks, nothing is lost
            writes.submit("good", lambda n=n: good.write_bytes(f"raw/{n}.txt", b"%d" % n))
        writes.submit("blocked", lambda: blocked.write_bytes("raw/x.txt", b"x"))
        assert writes.settle("good") is None
        assert {p.name: p.read_bytes() for p in (tmp_path / "good" / "raw").iterdir()} == {
            f"{n}.txt": b"%d" % n for n in range(40)
        }
        reason = writes.settle("blocked")
    assert reason is not None and "\n" not in reason
    assert writes.settle("good") is None  # nothing left to wait for
