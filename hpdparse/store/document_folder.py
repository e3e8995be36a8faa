"""`DocumentFolder`: one document's output folder (layout in `hpdparse.store`): its resume state,
its raw pages and its finished files, the same on every storage; a subclass per storage keeps the
bytes of its files, at names relative to the folder ("raw/page-0003.txt"). Two storages: the local
file system (`hpdparse.store.local.LocalFolder`) and an object store through fsspec
(`hpdparse.store.fsspec_folder.FsspecFolder`: an object PUT is atomic, "folders" are key
prefixes). Runners read and write output folders only through it; it is picklable, so worker
processes (the rasterizers writing image crops) can write through it too, and its methods may be
called from several threads at once (the runner saves pages on a few threads)."""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from collections.abc import Collection, Mapping
from typing import Any

from hpdparse.errors import OutputError
from hpdparse.store.atomic import is_own_temporary, json_bytes
from hpdparse.store.layout import (
    IMAGES_DIR,
    RAW_DIR,
    STATE_NAME,
    chunks_name,
    converted_pdf_name,
    docling_name,
    json_name,
    layout_pdf_name,
    markdown_name,
    raw_meta_name,
    raw_meta_number,
    raw_text_name,
    review_html_name,
)
from hpdparse.store.raw_pages import RawPage, decode_raw_page, raw_page_files
from hpdparse.store.state import STATE_FORMAT, DocumentState


class DocumentFolder(ABC):
    """The output folder of one document. File names are relative and use "/"."""

    location: str
    """Where the folder is, as messages and the run report show it."""

    name: str
    """The folder's own name, which is also the stem of its .md and .json."""

    # --- the files, kept by each storage ---

    @abstractmethod
    def exists(self) -> bool:
        """True when the folder exists (possibly empty)."""

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.location!r})"

    def create(self) -> None:
        """Create the folder and raw/ and check that files can be written there; raise
        OutputError (one line naming the folder) when not. Tidies what a killed run left half
        written. Nothing here: a storage whose folders are name prefixes creates none, and its
        first write reports a store that cannot be written."""
        return None

    def remove_if_empty(self) -> None:
        """Remove raw/, then the folder, each only when it is empty; never raises. Nothing here
        (folders that are name prefixes)."""
        return None

    @abstractmethod
    def read_bytes(self, name: str) -> bytes:
        """The content of file `name`; OSError (FileNotFoundError when it does not exist)."""

    def read_many(self, names: list[str]) -> dict[str, bytes | None]:
        """The content of each file of `names`, None for one that is missing or cannot be read.
        One after the other here; a storage whose requests take long reads them concurrently."""
        contents: dict[str, bytes | None] = {}
        for name in names:
            try:
                contents[name] = self.read_bytes(name)
            except OSError:
                contents[name] = None
        return contents

    @abstractmethod
    def write_bytes(self, name: str, data: bytes) -> None:
        """Write file `name` atomically and durably: a reader sees the old content or all of the
        new, never a part, whenever the process dies. Creates missing sub folders."""

    def write_many(self, files: Mapping[str, bytes]) -> None:
        """`write_bytes` of each of `files` (name -> bytes), in no set order: one after the other
        here; a storage whose requests take long writes them concurrently. OSError when one
        cannot be written (the others may or may not be)."""
        for name, data in files.items():
            self.write_bytes(name, data)

    @abstractmethod
    def is_file(self, name: str) -> bool:
        """True when file `name` exists."""

    @abstractmethod
    def delete(self, name: str) -> None:
        """Delete file `name`; nothing when it does not exist; OSError when it cannot."""

    def delete_many(self, names: list[str]) -> None:
        """`delete` of each of `names`, in no set order: one after the other here; a storage
        whose requests take long deletes them in one batch."""
        for name in names:
            self.delete(name)

    @abstractmethod
    def delete_tree(self, name: str) -> None:
        """Delete sub folder `name` and everything in it, as far as possible; never raises."""

    @abstractmethod
    def list_files(self, folder: str) -> list[str]:
        """The names (without the folder) of the files directly in sub folder `folder`; [] when
        it does not exist."""

    # --- the folder ---

    def clear(self, stem: str) -> None:
        """--overwrite: drop the finished Markdown first (so the folder reads as unfinished), then
        everything else this tool wrote there."""
        named = (markdown_name, json_name, layout_pdf_name, converted_pdf_name, review_html_name)
        for name in (*named, docling_name, chunks_name):
            self.delete(name(stem))
        self.delete_tree(IMAGES_DIR)
        self.delete_tree(RAW_DIR)

    # --- resume state (raw/document.json) ---

    def _read_state_json(self) -> dict[str, Any] | None:
        try:
            data = json.loads(self.read_bytes(STATE_NAME).decode("utf-8"))
        except (OSError, ValueError):
            return None
        return data if isinstance(data, dict) and data.get("format") == STATE_FORMAT else None

    def owner(self) -> str | None:
        """The source path the resume state records, or None when there is no readable state."""
        data = self._read_state_json()
        return data.get("source") if data else None

    def load_state(self) -> DocumentState | None:
        """The resume state, or None when there is none or it is unreadable or damaged."""
        data = self._read_state_json()
        if data is None:
            return None
        try:
            return DocumentState.from_json(data)
        except OutputError:
            return None

    def save_state(self, state: DocumentState) -> None:
        self.write_bytes(STATE_NAME, json_bytes(state.to_json()))

    def remove_state(self) -> None:
        self.delete(STATE_NAME)

    # --- raw pages (raw/page-NNNN.txt and .json) ---

    def write_raw_page(self, page: RawPage) -> None:
        """Save one decoded page: the text first, then its metadata with the text's sha256 (the
        metadata file is the commit point of the page)."""
        self.write_raw_files(raw_page_files(page))

    def write_raw_files(self, files: Mapping[str, bytes]) -> None:
        """Write a page's `raw_page_files`, in their order (the metadata, its commit point,
        last)."""
        for name, data in files.items():
            self.write_bytes(name, data)

    def read_raw_page(self, number: int) -> RawPage | None:
        """A saved page whose metadata exists, is valid and has the sha256 of its text; None
        otherwise."""
        return self.read_raw_pages([number])[number]

    def read_raw_pages(
        self, numbers: list[int], written: Mapping[str, bytes] | None = None
    ) -> dict[int, RawPage | None]:
        """`read_raw_page` of each of `numbers`, their files read together (concurrently on an
        object store), except those in `written` (the `raw_page_files` of pages this process
        wrote: they are taken as they are, not read back)."""
        known = written or {}
        names = [name for n in numbers for name in (raw_meta_name(n), raw_text_name(n))]
        contents: dict[str, bytes | None] = {name: known[name] for name in names if name in known}
        contents.update(self.read_many([name for name in names if name not in known]))
        return {
            n: decode_raw_page(n, contents[raw_text_name(n)], contents[raw_meta_name(n)])
            for n in numbers
        }

    def remove_raw_page(self, number: int) -> None:
        """Forget a saved page (metadata first: a crash in between leaves it unusable, not
        wrong)."""
        self.delete(raw_meta_name(number))
        self.delete(raw_text_name(number))

    def saved_page_numbers(self) -> list[int]:
        """Page numbers that have a raw metadata file (valid or not)."""
        numbers = {raw_meta_number(name) for name in self.list_files(RAW_DIR)}
        return sorted(n for n in numbers if n is not None)

    # --- the finished document ---

    def has_markdown(self, stem: str) -> bool:
        return self.is_file(markdown_name(stem))

    def has_state(self) -> bool:
        return self.is_file(STATE_NAME)

    def read_json(self, stem: str) -> Any:
        """The document's <stem>.json as written (FileNotFoundError, OSError, ValueError)."""
        return json.loads(self.read_bytes(json_name(stem)).decode("utf-8"))

    def has_layout_pdf(self, stem: str) -> bool:
        """True when the --layout overlay (hpdparse.overlay.layout_pdf) exists."""
        return self.is_file(layout_pdf_name(stem))

    def write_layout_pdf(self, stem: str, pdf: bytes) -> None:
        self.write_bytes(layout_pdf_name(stem), pdf)

    def has_converted_pdf(self, stem: str) -> bool:
        """True when the PDF an Office or HTML input was converted to is kept in the folder."""
        return self.is_file(converted_pdf_name(stem))

    def write_converted_pdf(self, stem: str, pdf: bytes) -> None:
        self.write_bytes(converted_pdf_name(stem), pdf)

    def write_review_html(self, stem: str, html: str) -> None:
        self.write_bytes(review_html_name(stem), html.encode("utf-8"))

    def remove_markdown(self, stem: str) -> None:
        """Mark the document unfinished: its .md is written last, so it goes first."""
        self.delete(markdown_name(stem))

    def write_finished(
        self,
        state: DocumentState,
        data: Any,
        markdown: str,
        docling: bytes | None = None,
        chunks: bytes | None = None,
    ) -> None:
        """Write a finished document: its <stem>.json (`data`), its resume state and the exports
        asked for (`docling`, `chunks`: None when not) all at once (concurrently on an object
        store), then, once they are all written, its .md."""
        exports = {docling_name(state.stem): docling, chunks_name(state.stem): chunks}
        files = {name: content for name, content in exports.items() if content is not None}
        files[json_name(state.stem)] = json_bytes(data)
        files[STATE_NAME] = json_bytes(state.to_json())
        self.write_many(files)
        self.write_bytes(markdown_name(state.stem), markdown.encode("utf-8"))

    def remove_stale_outputs(self, stem: str, images: Collection[str]) -> None:
        """Drop the exports and every image but `images` (names in the folder: the crops about to
        be written, which may be written meanwhile, their temporary files too); with no image to
        keep, all of images/. On an object store: one listing of images/, then one batched
        delete."""
        if not images:
            self.delete_many([docling_name(stem), chunks_name(stem)])
            self.delete_tree(IMAGES_DIR)
            return
        listed = self.list_files(IMAGES_DIR)
        stale = [f"{IMAGES_DIR}/{name}" for name in listed if not is_own_temporary(name)]
        stale = [name for name in stale if name not in images]
        self.delete_many([docling_name(stem), chunks_name(stem), *stale])

    def write_image(self, name: str, png: bytes) -> None:
        """Write an image crop; `name` is relative to the folder ("images/page-0001-...png")."""
        self.write_bytes(name, png)
