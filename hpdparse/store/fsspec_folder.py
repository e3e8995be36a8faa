"""A document folder on an object store (s3://, gs://, az://... through fsspec): the folder is a
key prefix, a file is an object.

Atomic: every file is written with one `pipe_file` (one PUT; s3fs switches to a multipart upload,
completed or invisible, only past its block size), so a reader sees the old object or the whole
new one and a killed run leaves no half object. There are no temporary files to tidy and no
folders to create or remove. Listings are never cached (other processes write the same folder).

Requests: `list_files` and `exists` are one LIST each, `is_file` one HEAD, `read_bytes` one GET,
`read_many` one GET per object, all at once (fsspec's concurrent `cat`), `write_bytes` one PUT,
`write_many` one PUT per object, all at once (fsspec's concurrent `pipe`), `delete` one DELETE,
`delete_many` one batched DELETE (S3's DeleteObjects), `delete_tree` one LIST and, when it
found objects, one batched DELETE.

Every storage failure comes out as an OSError whose `strerror` is a one-line reason without
secrets (FileNotFoundError when an object is missing), as the runner expects of a folder. The
folder pickles as its URL; each process opens its own file system with the run's storage
options (`hpdparse.remote`).
"""

from __future__ import annotations

import contextlib
import errno
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from hpdparse.remote import filesystem, join, missing_bucket_reason, redact, storage_reason
from hpdparse.store.document_folder import DocumentFolder
from hpdparse.store.local import LocalFolder

if TYPE_CHECKING:
    from fsspec import AbstractFileSystem

T = TypeVar("T")


class StorageError(OSError):
    """A request to the object store failed; `strerror` says why in one line."""


def storage_call(url: str, call: Callable[[], T], write: bool = False) -> T:
    """Run `call` (fsspec requests about `url`); any failure becomes FileNotFoundError (missing)
    or StorageError, both with a one-line `strerror` and `filename` the URL. A `write` that
    finds nothing there found no bucket (gcsfs and adlfs only say "not found")."""
    try:
        return call()
    except FileNotFoundError as exc:
        reason = missing_bucket_reason(url) if write else storage_reason(exc)
        raise FileNotFoundError(errno.ENOENT, reason, redact(url)) from None
    except PermissionError as exc:
        raise StorageError(errno.EACCES, redact(storage_reason(exc)), redact(url)) from None
    except Exception as exc:
        raise StorageError(errno.EIO, redact(storage_reason(exc)), redact(url)) from None


class FsspecFolder(DocumentFolder):
    """A document folder at a URL (s3://bucket/out/<stem>)."""

    def __init__(self, url: str) -> None:
        self.url = url.rstrip("/")
        self.location = redact(self.url)
        self.name = self.url.rsplit("/", 1)[-1]
        self._fs: AbstractFileSystem | None = None
        self._root = ""

    def __reduce__(self) -> tuple[type[FsspecFolder], tuple[str]]:
        return FsspecFolder, (self.url,)  # the URL alone: each process opens its file system

    @property
    def fs(self) -> AbstractFileSystem:
        if self._fs is None:
            self._fs, self._root = filesystem(self.url)
            self._root = self._root.rstrip("/")
        return self._fs

    def _path(self, name: str = "") -> str:
        _ = self.fs  # opens the file system, which sets the root
        return f"{self._root}/{name}" if name else self._root

    def _call(
        self, name: str, method: Callable[..., T], *args: object, write: bool = False, **kw: object
    ) -> T:
        """`method` (of `fs`) on file `name`, through `storage_call`."""
        path = self._path(name)
        return storage_call(join(self.url, name), lambda: method(path, *args, **kw), write)

    def exists(self) -> bool:
        try:
            return bool(self._call("", self.fs.ls, detail=False))
        except FileNotFoundError:
            return False

    def read_bytes(self, name: str) -> bytes:
        return self._call(name, self.fs.cat_file)

    def read_many(self, names: list[str]) -> dict[str, bytes | None]:
        paths = {self._path(name): name for name in names}
        if not paths or any(c in self._root for c in "*?["):  # fsspec would take them as globs
            return super().read_many(names)
        try:
            contents = storage_call(self.url, lambda: self.fs.cat(list(paths), on_error="return"))
        except OSError:
            return dict.fromkeys(names)
        return {
            name: data if isinstance(data := contents.get(path), bytes) else None
            for path, name in paths.items()
        }

    def write_bytes(self, name: str, data: bytes) -> None:
        self._call(name, self.fs.pipe_file, data, write=True)

    def write_many(self, files: Mapping[str, bytes]) -> None:
        if len(files) < 2:
            return super().write_many(files)
        paths = {self._path(name): data for name, data in files.items()}
        storage_call(self.url, lambda: self.fs.pipe(paths))

    def is_file(self, name: str) -> bool:
        try:
            info = self._call(name, self.fs.info)
        except FileNotFoundError:
            return False
        return info.get("type") == "file"

    def delete(self, name: str) -> None:
        with contextlib.suppress(FileNotFoundError):
            self._call(name, self.fs.rm_file)

    def delete_many(self, names: list[str]) -> None:
        if len(names) < 2:
            return super().delete_many(names)
        paths = [self._path(name) for name in names]
        with contextlib.suppress(FileNotFoundError):
            storage_call(self.url, lambda: self.fs.rm(paths))

    def delete_tree(self, name: str) -> None:
        # find + rm of the names found: rm(recursive=True) would also ask whether the prefix
        # exists (a HEAD and a LIST more), even when there is nothing to delete.
        with contextlib.suppress(OSError):
            objects = self._call(name, self.fs.find)
            if objects:
                storage_call(join(self.url, name), lambda: self.fs.rm(objects))

    def list_files(self, folder: str) -> list[str]:
        path = self._path(folder).rstrip("/")
        try:
            entries = self._call(folder, self.fs.ls, detail=True)
        except FileNotFoundError:
            return []
        return [
            entry["name"].rstrip("/").rsplit("/", 1)[-1]
            for entry in entries
            if entry.get("type") == "file" and entry["name"].rstrip("/") != path
        ]


def copy_tree(url: str, target: Path) -> None:
    """Copy every object under `url` into the local folder `target` (created), keys as relative
    paths, each file written atomically. StorageError or FileNotFoundError (one line)."""
    source, copy = FsspecFolder(url), LocalFolder(target)
    names = source._call("", source.fs.find)
    if not names:
        raise FileNotFoundError(errno.ENOENT, "no such folder (no object under it)", redact(url))
    for name in names:
        relative = name[len(source._root) :].lstrip("/")
        copy.write_bytes(relative, source.read_bytes(relative))
