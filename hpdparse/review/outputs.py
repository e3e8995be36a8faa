"""What `convert` left in an output folder, as the review tools read it: the document folders
under OUT, each one's resume state and JSON, its source file, and the paths these tools write."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hpdparse.errors import InputError, OutputError
from hpdparse.store.folders import RAW_DIR, STATE_FILE, json_path, markdown_path
from hpdparse.store.state import DocumentState, load_state

INDEX_NAME = "review.html"


def layout_path(doc_dir: Path, stem: str) -> Path:
    return doc_dir / f"{stem}.layout.pdf"


def review_path(doc_dir: Path, stem: str) -> Path:
    return doc_dir / f"{stem}.review.html"


def is_document_folder(path: Path) -> bool:
    return (path / RAW_DIR / STATE_FILE).is_file()


def find_document_folders(out: Path) -> list[Path]:
    """The document folders of a run (OUT/<stem>/), by name; OUT itself when it is one."""
    if is_document_folder(out):
        return [out]
    try:
        children = sorted(p for p in out.iterdir() if p.is_dir())
    except OSError as exc:
        raise OutputError(f"{out}: cannot be read ({exc.strerror or exc})") from None
    return [p for p in children if is_document_folder(p)]


@dataclass
class DocumentOutput:
    """One document folder: its resume state and, once written, its JSON."""

    doc_dir: Path
    state: DocumentState
    data: dict[str, Any] | None  # <stem>.json; None when not written (yet) or unreadable
    problem: str | None = None  # why `data` is None although the folder says it is finished

    @property
    def stem(self) -> str:
        return self.state.stem

    @property
    def finished(self) -> bool:
        return markdown_path(self.doc_dir, self.stem).is_file()


def load_document(doc_dir: Path) -> DocumentOutput:
    """Read a document folder; OutputError when it is not one (or its state is damaged)."""
    state = load_state(doc_dir)
    if state is None:
        raise OutputError(
            f"{doc_dir}: not an hpdparse output folder (no readable raw/document.json)"
        )
    path = json_path(doc_dir, state.stem)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return DocumentOutput(doc_dir, state, None)
    except (OSError, ValueError) as exc:
        return DocumentOutput(doc_dir, state, None, f"{path}: cannot be read ({exc})")
    if not isinstance(data, dict) or not isinstance(data.get("pages"), list):
        return DocumentOutput(doc_dir, state, None, f"{path}: not an hpdparse document JSON")
    return DocumentOutput(doc_dir, state, data)


def checked_source(state: DocumentState, doc_dir: Path) -> Path:
    """The document's source file, as long as it is still the file that was converted."""
    source = Path(state.source.path)
    if not source.is_file():
        raise InputError(
            f"{source}: source not found (moved or deleted since {doc_dir} was written)"
        )
    if not state.source.matches_file(source):
        raise InputError(f"{source}: the source changed since {doc_dir} was converted")
    return source
