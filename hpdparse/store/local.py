"""The local file system: a document folder is a directory, files are written with
`hpdparse.store.atomic` (temporary file, fsync, rename)."""

from __future__ import annotations

import contextlib
import os
import shutil
from pathlib import Path

from hpdparse.errors import OutputError
from hpdparse.store.atomic import TMP_SUFFIX, atomic_write_bytes
from hpdparse.store.document_folder import DocumentFolder
from hpdparse.store.layout import RAW_DIR


class LocalFolder(DocumentFolder):
    """A document folder on the local file system."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self.location = str(self.path)
        self.name = self.path.name

    def exists(self) -> bool:
        return self.path.exists()

    def create(self) -> None:
        try:
            (self.path / RAW_DIR).mkdir(parents=True, exist_ok=True)
            probe = self.path / RAW_DIR / f".probe.{os.getpid()}{TMP_SUFFIX}"
            probe.write_bytes(b"")
            probe.unlink()
        except OSError as exc:
            reason = exc.strerror or exc.__class__.__name__
            message = f"{self.path}: cannot write the output folder: {reason}"
            raise OutputError(message, path=self.path) from exc
        # Delete the temporary files of writes a killed run left unfinished.
        folders = [self.path]
        with contextlib.suppress(OSError):
            folders += [entry for entry in self.path.iterdir() if entry.is_dir()]
        for folder in folders:
            for tmp in folder.glob(f".*{TMP_SUFFIX}"):
                with contextlib.suppress(OSError):
                    tmp.unlink()

    def remove_if_empty(self) -> None:
        with contextlib.suppress(OSError):
            (self.path / RAW_DIR).rmdir()
        with contextlib.suppress(OSError):
            self.path.rmdir()

    def read_bytes(self, name: str) -> bytes:
        return (self.path / name).read_bytes()

    def write_bytes(self, name: str, data: bytes) -> None:
        target = self.path / name
        target.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_bytes(target, data)

    def is_file(self, name: str) -> bool:
        return (self.path / name).is_file()

    def delete(self, name: str) -> None:
        with contextlib.suppress(FileNotFoundError):
            (self.path / name).unlink()

    def delete_tree(self, name: str) -> None:
        shutil.rmtree(self.path / name, ignore_errors=True)

    def list_files(self, folder: str) -> list[str]:
        directory = self.path / folder
        if not directory.is_dir():
            return []
        return [entry.name for entry in os.scandir(directory) if not entry.is_dir()]
