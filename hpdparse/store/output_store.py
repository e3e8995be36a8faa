"""`OutputStore`: the root under which every document gets its folder (`convert -o OUT`), and
the functions that open a store or a folder from what the user gave (today always a local path;
the one place an object store such as s3:// would be chosen)."""

from __future__ import annotations

import os
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


def open_output_store(location: str | os.PathLike[str]) -> OutputStore:
    """The output store at `location` (a local folder)."""
    from hpdparse.store.local import LocalOutputStore

    return LocalOutputStore(Path(location))


def open_document_folder(location: str | os.PathLike[str]) -> DocumentFolder:
    """The document folder at `location` (a local folder), e.g. for `hpdparse render`."""
    from hpdparse.store.local import LocalFolder

    return DocumentFolder(LocalFolder(Path(location)))
