"""Document folders: atomic writes, raw pages and their reuse, resume state, folder names."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from hpdparse.errors import OutputError
from hpdparse.store.atomic import atomic_write_bytes, atomic_write_json
from hpdparse.store.folders import (
    prepare_doc_dir,
    raw_meta_path,
    raw_txt_path,
    remove_stray_temporaries,
)
from hpdparse.store.naming import assign_output_dirs
from hpdparse.store.raw_pages import (
    raw_page_reusable,
    read_raw_page,
    remove_raw_page,
    write_raw_page,
)
from hpdparse.store.state import STATUS_CONVERTED, DocumentState, SourceIdentity, load_state

KEY = {"model": "m", "revision": None, "prompt": "document parsing with fork.", "max_tokens": 8000}


def test_atomic_write_replaces_whole_file_and_leaves_no_temporary(tmp_path: Path) -> None:
    target = tmp_path / "a.txt"
    target.write_text("old")
    atomic_write_bytes(target, b"new content")
    assert target.read_bytes() == b"new content"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.txt"]


def test_atomic_write_failure_keeps_old_file(tmp_path: Path) -> None:
    target = tmp_path / "a.json"
    atomic_write_json(target, {"v": 1})
    with pytest.raises(TypeError):
        atomic_write_json(target, {"v": object()})  # not serialisable: fails before writing
    assert target.read_text().strip().replace(" ", "").replace("\n", "") == '{"v":1}'
    assert [p.name for p in tmp_path.iterdir()] == ["a.json"]


def test_stray_temporaries_are_removed(tmp_path: Path) -> None:
    (tmp_path / "raw").mkdir()
    stray = tmp_path / "raw" / ".page-0001.txt.999.hpdtmp"
    stray.write_text("half")
    keep = tmp_path / "raw" / "page-0001.txt"
    keep.write_text("x")
    remove_stray_temporaries(tmp_path)
    assert not stray.exists() and keep.exists()


def test_raw_page_roundtrip_and_reuse_rules(tmp_path: Path) -> None:
    prepare_doc_dir(tmp_path)
    text = "<BLOCK>text [1, 2, 3, 4]<CHILD>héllo\n"
    write_raw_page(tmp_path, 3, text, {"reuse_key": KEY, "requested_dpi": 200})
    page = read_raw_page(tmp_path, 3)
    assert page is not None and page.text == text
    assert raw_txt_path(tmp_path, 3).name == "page-0003.txt"
    assert raw_page_reusable(page, KEY, 200)
    assert not raw_page_reusable(page, KEY, 150)  # other dpi
    assert not raw_page_reusable(page, {**KEY, "model": "other"}, 200)
    assert not raw_page_reusable(page, {**KEY, "max_tokens": 100}, 200)
    # A text that does not match the recorded sha256 is not a page.
    raw_txt_path(tmp_path, 3).write_text(text + "tampered")
    assert read_raw_page(tmp_path, 3) is None
    # Text without metadata (killed between the two writes) is not a page either.
    raw_meta_path(tmp_path, 3).unlink()
    assert read_raw_page(tmp_path, 3) is None
    remove_raw_page(tmp_path, 3)
    assert not raw_txt_path(tmp_path, 3).exists()


def test_prepare_doc_dir_reports_unwritable_folder(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    with pytest.raises(OutputError) as info:
        prepare_doc_dir(blocker / "doc")
    assert str(blocker / "doc") in str(info.value) and "\n" not in str(info.value)


def _state(src: Path, stem: str) -> DocumentState:
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


def test_state_roundtrip_and_source_identity(tmp_path: Path) -> None:
    src = tmp_path / "a.pdf"
    src.write_bytes(b"%PDF-1.4 one")
    doc = tmp_path / "out" / "a"
    prepare_doc_dir(doc)
    state = _state(src, "a")
    state.save(doc)
    loaded = load_state(doc)
    assert loaded == state
    assert loaded.source.matches_file(src)
    # Same size, new content and mtime: detected by the sha256.
    src.write_bytes(b"%PDF-1.4 two")
    os.utime(src, ns=(1, 1))
    assert not loaded.source.matches_file(src)


def test_duplicate_stems_get_distinct_stable_folders(tmp_path: Path) -> None:
    a = tmp_path / "a" / "x.pdf"
    b = tmp_path / "b" / "x.pdf"
    c = tmp_path / "c" / "y.pdf"
    for p in (a, b, c):
        p.parent.mkdir()
        p.write_bytes(b"%PDF-1.4")
    out = tmp_path / "out"
    dirs = assign_output_dirs([b, c, a], out)
    assert dirs[c] == out / "y"
    assert dirs[a] == out / "x"  # first in path order gets the plain stem
    assert dirs[b].parent == out and dirs[b].name.startswith("x-") and len(dirs[b].name) == 10
    assert assign_output_dirs([a, b, c], out) == dirs  # input order does not matter
    # b converted alone first owns out/x; later runs with both keep it there.
    prepare_doc_dir(out / "x")
    _state(b, "x").save(out / "x")
    again = assign_output_dirs([a, b], out)
    assert again[b] == out / "x"
    assert again[a].name.startswith("x-") and again[a] != dirs[b]
    assert assign_output_dirs([a], out)[a] == again[a]  # out/x is b's even when b is absent
