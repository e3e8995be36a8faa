"""`OutputStore`: the root under which every document gets its folder (`convert -o OUT`); a
backend (store.local) implements it, `output_store.open_output_store` chooses one."""

from __future__ import annotations

from abc import ABC, abstractmethod
from pathlib import Path

from hpdparse.store.document_folder import DocumentFolder
from hpdparse.store.naming import assign_folder_names


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
        """Every source's own folder, stable across runs (see `naming.assign_folder_names`)."""
        names = assign_folder_names(sources, lambda name: self.folder(name).owner())
        return {source: self.folder(name) for source, name in names.items()}
