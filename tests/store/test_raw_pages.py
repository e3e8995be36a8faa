"""The raw page record: written and read by the same code, in the file format of every earlier
version (same keys, same order), reusable only when it fits the run."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from hpdparse.engines.base import DecodeKey, EngineInfo, PageResult, ReuseKey
from hpdparse.settings import TextLayerMode
from hpdparse.sources.document import PageGeometry
from hpdparse.store.document_folder import DocumentFolder
from hpdparse.store.local import LocalFolder
from hpdparse.store.raw_pages import RawPage

KEY = DecodeKey("m", None, "document parsing with fork.", 8000)

TEXT = "<BLOCK>text [1, 2, 3, 4]<CHILD>héllo\n"

PAGE = RawPage(
    number=3,
    result=PageResult(
        3,
        TEXT,
        finish_reason="stop",
        prompt_tokens=6412,
        output_tokens=321,
        seconds=1.2341,  # saved to the ms
        stats={"forks": 4, "decoding_steps": 80},
    ),
    geometry=PageGeometry(
        width_px=1241, height_px=1754, dpi=150, label="iii", width_pt=595.5, height_pt=842.0
    ),
    info=EngineInfo("openai", "m", None, "document parsing with fork.", 8000),
    reuse=ReuseKey(KEY, 200),
)

# raw/page-0003.json as hpdparse 0.x wrote it (a dict literal in the scheduler), byte for byte.
EXPECTED_JSON = """{
  "page": 3,
  "engine": "openai",
  "model": "m",
  "revision": null,
  "prompt": "document parsing with fork.",
  "max_tokens": 8000,
  "reuse_key": {
    "model": "m",
    "revision": null,
    "prompt": "document parsing with fork.",
    "max_tokens": 8000
  },
  "requested_dpi": 200,
  "dpi": 150,
  "width_px": 1241,
  "height_px": 1754,
  "width_pt": 595.5,
  "height_pt": 842.0,
  "label": "iii",
  "finish_reason": "stop",
  "prompt_tokens": 6412,
  "output_tokens": 321,
  "seconds": 1.234,
  "stats": {
    "forks": 4,
    "decoding_steps": 80
  },
  "sha256": "SHA"
}
"""


def folder_at(path: Path) -> DocumentFolder:
    folder = LocalFolder(path)
    folder.create()
    return folder


def test_the_file_format_is_unchanged(tmp_path: Path) -> None:
    import hashlib

    folder = folder_at(tmp_path)
    folder.write_raw_page(PAGE)
    sha = hashlib.sha256(TEXT.encode()).hexdigest()
    assert (tmp_path / "raw" / "page-0003.json").read_text() == EXPECTED_JSON.replace("SHA", sha)
    assert (tmp_path / "raw" / "page-0003.txt").read_bytes() == TEXT.encode()


def test_roundtrip_and_reuse_rules(tmp_path: Path) -> None:
    folder = folder_at(tmp_path)
    folder.write_raw_page(PAGE)
    page = folder.read_raw_page(3)
    assert page == dataclasses.replace(PAGE, result=dataclasses.replace(PAGE.result, seconds=1.234))
    assert folder.saved_page_numbers() == [3]
    assert page.reusable(ReuseKey(KEY, 200))
    assert not page.reusable(ReuseKey(KEY, 150))  # other requested dpi (150: what the page got)
    assert not page.reusable(ReuseKey(dataclasses.replace(KEY, model="other"), 200))
    assert not page.reusable(ReuseKey(dataclasses.replace(KEY, max_tokens=100), 200))


def test_a_record_of_an_earlier_version_reads_with_defaults(tmp_path: Path) -> None:
    folder = folder_at(tmp_path)
    folder.write_raw_page(dataclasses.replace(PAGE, number=2))
    path = tmp_path / "raw" / "page-0002.json"
    old = json.loads(path.read_text())
    for key in ("label", "width_pt", "height_pt", "stats", "seconds", "prompt_tokens"):
        del old[key]
    path.write_text(json.dumps(old))
    page = folder.read_raw_page(2)
    assert page is not None and page.reusable(ReuseKey(KEY, 200))
    assert page == dataclasses.replace(
        PAGE,
        number=2,
        geometry=dataclasses.replace(PAGE.geometry, label=None, width_pt=None, height_pt=None),
        result=dataclasses.replace(PAGE.result, key=2, stats={}, seconds=0.0, prompt_tokens=0),
    )


def test_damaged_pages_are_not_pages(tmp_path: Path) -> None:
    folder = folder_at(tmp_path)
    folder.write_raw_page(PAGE)
    txt, meta = tmp_path / "raw" / "page-0003.txt", tmp_path / "raw" / "page-0003.json"
    # A text that does not match the recorded sha256 is not a page.
    txt.write_text(TEXT + "tampered")
    assert folder.read_raw_page(3) is None
    txt.write_text(TEXT)
    assert folder.read_raw_page(3) is not None
    # Metadata of the wrong type is not a page either.
    good = meta.read_text()
    meta.write_text(good.replace('"width_px": 1241', '"width_px": "wide"'))
    assert folder.read_raw_page(3) is None
    meta.write_text("[1, 2]")
    assert folder.read_raw_page(3) is None
    # Text without metadata (killed between the two writes) is not a page, nor saved.
    meta.unlink()
    assert folder.read_raw_page(3) is None and folder.saved_page_numbers() == []
    folder.remove_raw_page(3)
    assert not txt.exists()


def test_a_prefer_page_carries_text_layer_last_in_its_key_and_is_reused_by_prefer_only(
    tmp_path: Path,
) -> None:
    folder = folder_at(tmp_path)
    prefer = dataclasses.replace(KEY, text_layer=TextLayerMode.PREFER)
    folder.write_raw_page(dataclasses.replace(PAGE, reuse=ReuseKey(prefer, 200)))
    meta = json.loads((tmp_path / "raw" / "page-0003.json").read_text())
    assert list(meta["reuse_key"]) == ["model", "revision", "prompt", "max_tokens", "text_layer"]
    assert meta["reuse_key"]["text_layer"] == "prefer"
    page = folder.read_raw_page(3)
    assert page is not None and page.reusable(ReuseKey(prefer, 200))
    assert not page.reusable(ReuseKey(KEY, 200))
    # A record whose key is not one is a page still, never reused.
    meta["reuse_key"] = {"model": "m"}
    (tmp_path / "raw" / "page-0003.json").write_text(json.dumps(meta))
    page = folder.read_raw_page(3)
    assert page is not None and page.reuse is None and not page.reusable(ReuseKey(KEY, 200))
