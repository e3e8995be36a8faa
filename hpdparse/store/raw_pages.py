"""Raw pages: the model's text of one page (raw/page-NNNN.txt) and its metadata (.json).

The text is written first, then the metadata with the text's sha256: the metadata file is the
commit point, so a page is reusable only when both exist and agree."""

from __future__ import annotations

import contextlib
import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hpdparse.store.atomic import atomic_write_json, atomic_write_text, sha256_text
from hpdparse.store.folders import RAW_DIR, raw_meta_path, raw_txt_path

_RAW_NAME = re.compile(r"^page-(\d{4,})\.(txt|json)$")


def write_raw_page(doc_dir: Path, number: int, text: str, meta: dict[str, Any]) -> None:
    """Save one finished page: the text first, then its metadata with the text's sha256 (the
    metadata file is the commit point of the page)."""
    meta = dict(meta)
    meta["sha256"] = sha256_text(text)
    atomic_write_text(raw_txt_path(doc_dir, number), text)
    atomic_write_json(raw_meta_path(doc_dir, number), meta)


def remove_raw_page(doc_dir: Path, number: int) -> None:
    """Forget a saved page (metadata first, so a crash in between leaves it unusable, not wrong)."""
    for path in (raw_meta_path(doc_dir, number), raw_txt_path(doc_dir, number)):
        with contextlib.suppress(FileNotFoundError):
            path.unlink()


@dataclass
class RawPage:
    number: int
    text: str
    meta: dict[str, Any]


def read_raw_page(doc_dir: Path, number: int) -> RawPage | None:
    """A saved page whose metadata exists and whose sha256 matches its text; None otherwise."""
    try:
        with open(raw_meta_path(doc_dir, number), encoding="utf-8") as f:
            meta = json.load(f)
        text = raw_txt_path(doc_dir, number).read_bytes().decode("utf-8")
    except (OSError, ValueError):
        return None
    if not isinstance(meta, dict) or meta.get("sha256") != sha256_text(text):
        return None
    return RawPage(number, text, meta)


def raw_page_reusable(page: RawPage | None, reuse_key: dict[str, Any], dpi: int) -> bool:
    """True when a saved page was made by the same model, revision, prompt and max tokens, from a
    page rendered at the same DPI."""
    if page is None:
        return False
    return page.meta.get("reuse_key") == reuse_key and page.meta.get("requested_dpi") == dpi


def saved_page_numbers(doc_dir: Path) -> list[int]:
    """Page numbers that have a raw metadata file (valid or not)."""
    folder = doc_dir / RAW_DIR
    if not folder.is_dir():
        return []
    numbers = set()
    for entry in os.scandir(folder):
        m = _RAW_NAME.match(entry.name)
        if m and m.group(2) == "json":
            numbers.add(int(m.group(1)))
    return sorted(numbers)
