"""Where the files of one document folder live: `FolderBackend`, bytes at names relative to the
folder ("raw/page-0003.txt").

The local file system is the only backend today (`hpdparse.store.local.LocalFolder`). An object
store (s3://bucket/prefix/) would implement these same methods (an object PUT is atomic, "folders"
are key prefixes) and everything above them, `DocumentFolder` and the runner, would stay as it is.
A backend is picklable: rasterizer processes write image crops through it.
"""

from __future__ import annotations

from abc import ABC, abstractmethod


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

    @abstractmethod
    def write_bytes(self, name: str, data: bytes) -> None:
        """Write file `name` atomically and durably: a reader sees the old content or all of the
        new, never a part, whenever the process dies. Creates missing sub folders."""

    @abstractmethod
    def is_file(self, name: str) -> bool:
        """True when file `name` exists."""

    @abstractmethod
    def delete(self, name: str) -> None:
        """Delete file `name`; nothing when it does not exist; OSError when it cannot."""

    @abstractmethod
    def delete_tree(self, name: str) -> None:
        """Delete sub folder `name` and everything in it, as far as possible; never raises."""

    @abstractmethod
    def list_files(self, folder: str) -> list[str]:
        """The names (without the folder) of the files directly in sub folder `folder`; [] when
        it does not exist."""
