"""Where the files of one document folder live: `FolderBackend`, bytes at names relative to the
folder ("raw/page-0003.txt").

Two backends: the local file system (`hpdparse.store.local.LocalFolder`) and an object store through
fsspec (`hpdparse.store.fsspec_folder.FsspecFolder`: an object PUT is atomic, "folders" are key
prefixes); everything above them, `DocumentFolder` and the runners, is the same for both. A
backend is picklable: rasterizer processes write image crops through it. Its methods may be called
from several threads at once (the runner saves pages on a few threads).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping


class FolderBackend(ABC):
    """The files of one document folder. Names are relative and use "/"."""

    @property
    @abstractmethod
    def location(self) -> str:
        """Where the folder is, as messages and the run report show it."""

    @property
    @abstractmethod
    def name(self) -> str:
        """The folder's own name: the stem of the document's files."""

    @abstractmethod
    def exists(self) -> bool:
        """True when the folder exists (possibly empty)."""

    @abstractmethod
    def create(self, workdir: str) -> None:
        """Create the folder and its sub folder `workdir` and check that files can be written
        there; raise OutputError (one line naming the folder) when not. Tidies what a killed run
        left half written."""

    @abstractmethod
    def remove_if_empty(self, workdir: str) -> None:
        """Remove the sub folder `workdir`, then the folder, each only when it is empty; never
        raises."""

    @abstractmethod
    def read_bytes(self, name: str) -> bytes:
        """The content of file `name`; OSError (FileNotFoundError when it does not exist)."""

    def read_many(self, names: list[str]) -> dict[str, bytes | None]:
        """The content of each file of `names`, None for one that is missing or cannot be read.
        One after the other here; a backend whose requests take long reads them concurrently."""
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
        here; a backend whose requests take long writes them concurrently. OSError when one
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
        """`delete` of each of `names`, in no set order: one after the other here; a backend
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
