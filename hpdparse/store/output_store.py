"""`OutputStore`: the root under which every document gets its folder (`convert -o OUT`), and
the functions that open a store or a folder from what the user gave: a local path, or a URL
(s3://bucket/prefix, through fsspec: `hpdparse.store.fsspec_folder`)."""

from __future__ import annotations

import os
from abc import ABC, abstractmethod
from pathlib import Path

from hpdparse.remote import is_url, local_path_of
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
    """The output store at `location`: a local folder, or a URL such as s3://bucket/prefix."""
    if is_url(location):
        from hpdparse.store.fsspec_folder import FsspecOutputStore

        return FsspecOutputStore(str(location))
    from hpdparse.store.local import LocalOutputStore

    return LocalOutputStore(Path(local_path_of(str(location))))


def open_document_folder(location: str | os.PathLike[str]) -> DocumentFolder:
    """The document folder at `location` (a local folder or a URL), e.g. for `hpdparse
    render`."""
    if is_url(location):
        from hpdparse.store.fsspec_folder import FsspecFolder

        return DocumentFolder(FsspecFolder(str(location)))
    from hpdparse.store.local import LocalFolder

    return DocumentFolder(LocalFolder(Path(local_path_of(str(location)))))
