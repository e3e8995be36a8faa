"""`OutputStore`: the root under which every document gets its folder (`convert -o OUT`); a
backend (store.local) implements it, `output_store.open_output_store` chooses one."""

from __future__ import annotations

from abc import ABC, abstractmethod
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from hpdparse.store.document_folder import DocumentFolder
from hpdparse.store.naming import assign_folder_names, stem_of

OWNER_READS = 8
"""Folders whose owner (raw/document.json) is read at once when a run assigns folders."""


class OutputStore(ABC):
    """Where the document folders of a run go."""

    @property
    @abstractmethod
    def location(self) -> str:
        """Where the store is, as messages and the run report show it."""

    @abstractmethod
    def folder(self, name: str) -> DocumentFolder:
        """The document folder called `name` (it may not exist yet)."""

    def assign_folders(self, sources: list[Path]) -> dict[Path, DocumentFolder]:
        """Every source's own folder, stable across runs (see `naming.assign_folder_names`).
        The folders' owners are read together, once per stem (on an object store a GET each,
        `OWNER_READS` at a time, not one after the other)."""
        stems = sorted({stem_of(source) for source in sources})
        with ThreadPoolExecutor(OWNER_READS, thread_name_prefix="hpdparse-owner") as pool:
            owners = dict(zip(stems, pool.map(self._owner, stems), strict=True))
        names = assign_folder_names(sources, owners.__getitem__)
        return {source: self.folder(name) for source, name in names.items()}

    def _owner(self, name: str) -> str | None:
        return self.folder(name).owner()
