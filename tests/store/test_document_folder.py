"""A document folder on the local backend: creating and tidying it, its resume state, the files
of a finished document; errors name the folder."""

from __future__ import annotations

import dataclasses
import os
import pickle
from pathlib import Path

import pytest

from hpdparse.engines.base import DecodeKey
from hpdparse.errors import OutputError
from hpdparse.store.local import LocalFolder
from hpdparse.store.output_store import open_document_folder
from hpdparse.store.state import DocumentState, SourceIdentity
from hpdparse.store.statuses import STATUS_CONVERTED

KEY = DecodeKey("m", None, "document parsing with fork.", 8000)


def make_state(src: Path, stem: str) -> DocumentState:
    return DocumentState(
        source=SourceIdentity.of(src),
        stem=stem,
        page_count=2,
        pages_spec=None,
        selected=[1, 2],
        dpi=200,
        engine="openai",
        model="m",
        revision=None,
        reuse_key=KEY,
        render_options={},
        status=STATUS_CONVERTED,
        failed_pages={2: "boom"},
    )


def test_create_removes_stray_temporaries(tmp_path: Path) -> None:
    (tmp_path / "raw").mkdir()
    (tmp_path / "images").mkdir()
    strays = [tmp_path / "raw" / ".page-0001.txt.999.hpdtmp", tmp_path / "images" / ".a.1.hpdtmp"]
    for stray in strays:
        stray.write_text("half")
    keep = tmp_path / "raw" / "page-0001.txt"
    keep.write_text("x")
    open_document_folder(tmp_path).create()
    assert not any(stray.exists() for stray in strays) and keep.exists()


def test_create_reports_an_unwritable_folder(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    with pytest.raises(OutputError) as info:
        open_document_folder(blocker / "doc").create()
    assert str(blocker / "doc") in str(info.value) and "\n" not in str(info.value)
    assert info.value.path == str(blocker / "doc")


def test_state_roundtrip_and_source_identity(tmp_path: Path) -> None:
    src = tmp_path / "a.pdf"
    src.write_bytes(b"%PDF-1.4 one")
    folder = open_document_folder(tmp_path / "out" / "a")
    assert folder.load_state() is None and folder.owner() is None
    folder.create()
    state = make_state(src, "a")
    folder.save_state(state)
    loaded = folder.load_state()
    assert loaded == state and folder.owner() == str(src)
    assert loaded.source.matches_file(src)
    # A state with no reuse key (hand-made) reads as one without, and is written back as it was.
    no_key = dataclasses.replace(state, reuse_key=None)
    folder.save_state(no_key)
    assert folder.load_state() == no_key
    assert '"reuse_key": {}' in (tmp_path / "out" / "a" / "raw" / "document.json").read_text()
    # Same size, new content and mtime: detected by the sha256.
    src.write_bytes(b"%PDF-1.4 two")
    os.utime(src, ns=(1, 1))
    assert not loaded.source.matches_file(src)
    # A damaged state is no state.
    (tmp_path / "out" / "a" / "raw" / "document.json").write_text('{"format": 1}')
    assert folder.load_state() is None
    folder.remove_state()
    assert folder.load_state() is None


def test_finished_files_clear_and_remove_if_empty(tmp_path: Path) -> None:
    folder = open_document_folder(tmp_path / "doc")
    folder.create()
    folder.write_bytes("doc.json", b'{"pages": []}')
    folder.write_image("images/page-0001-figure-01.png", b"png")
    folder.write_bytes("doc.md", b"# Title\n")
    folder.write_layout_pdf("doc", b"%PDF-")  # --layout and `hpdparse review` outputs
    folder.write_review_html("doc", "<html></html>")
    assert folder.has_markdown("doc")
    assert (tmp_path / "doc" / "images" / "page-0001-figure-01.png").read_bytes() == b"png"
    folder.delete_tree("images")
    assert not (tmp_path / "doc" / "images").exists()
    folder.remove_if_empty()  # not empty: stays
    assert folder.exists()
    folder.clear("doc")
    assert sorted(p.name for p in (tmp_path / "doc").iterdir()) == []
    folder.create()
    folder.remove_if_empty()
    assert not folder.exists()


def test_a_folder_travels_to_worker_processes(tmp_path: Path) -> None:
    folder = LocalFolder(tmp_path / "doc")
    copy = pickle.loads(pickle.dumps(folder))
    assert copy.location == folder.location == str(tmp_path / "doc") and copy.name == "doc"


def test_stale_outputs_go_and_the_crops_being_written_stay(tmp_path: Path) -> None:
    folder = open_document_folder(tmp_path / "doc")
    images = tmp_path / "doc" / "images"
    images.mkdir(parents=True)
    for name in ("page-0001-figure-01.png", "page-0002-figure-01.png", "page-0009-figure-01.png"):
        (images / name).write_bytes(b"old")
    own = images / f".page-0002-figure-01.png.{os.getpid()}.hpdtmp"  # this process writing it
    own.write_bytes(b"new, being written")
    stray = images / ".page-0009-figure-01.png.1.hpdtmp"  # left by a run that was killed
    stray.write_bytes(b"stray")
    (tmp_path / "doc" / "doc.docling.json").write_bytes(b"{}")
    keep = {"images/page-0001-figure-01.png", "images/page-0002-figure-01.png"}
    folder.remove_stale_outputs("doc", keep)
    assert sorted(p.name for p in images.iterdir()) == sorted(
        ["page-0001-figure-01.png", "page-0002-figure-01.png", own.name]
    )
    assert not (tmp_path / "doc" / "doc.docling.json").exists()
    folder.remove_stale_outputs("doc", set())  # no crop to keep: all of images/ goes
    assert not images.exists()
