"""What `convert` left in an output folder, as the review tools find it: the document folders
under OUT and each one's source file."""

from __future__ import annotations

from pathlib import Path

from hpdparse.errors import InputError, OutputError
from hpdparse.sources.location import UrlSource, source_location
from hpdparse.store.output_store import open_document_folder
from hpdparse.store.state import DocumentState

INDEX_NAME = "review.html"


def is_document_folder(path: Path) -> bool:
    return open_document_folder(path).has_state()


def find_document_folders(out: Path) -> list[Path]:
    """The document folders of a run (OUT/<stem>/), by name; OUT itself when it is one."""
    if is_document_folder(out):
        return [out]
    try:
        children = sorted(p for p in out.iterdir() if p.is_dir())
    except OSError as exc:
        raise OutputError(f"{out}: cannot be read ({exc.strerror or exc})") from None
    return [p for p in children if is_document_folder(p)]


def checked_source(state: DocumentState, doc_dir: Path | str) -> Path | UrlSource:
    """The document's source file (or object at a URL), as long as it is still the file that
    was converted."""
    source = source_location(state.source.path)
    if not source.is_file():
        raise InputError(
            f"{source}: source not found (moved or deleted since {doc_dir} was written)"
        )
    if not state.source.matches_file(source):
        raise InputError(f"{source}: the source changed since {doc_dir} was converted")
    return source
