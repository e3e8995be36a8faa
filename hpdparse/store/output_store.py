"""The functions that open an output store (`output_root.OutputStore`) or a document folder from
what the user gave: a local path, or a URL (s3://bucket/prefix, through fsspec:
`hpdparse.store.fsspec_folder`)."""

from __future__ import annotations

import os
from pathlib import Path

from hpdparse.remote import is_url, local_path_of
from hpdparse.store.document_folder import DocumentFolder
from hpdparse.store.output_root import OutputStore


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
