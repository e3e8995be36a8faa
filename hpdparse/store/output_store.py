"""The functions that open an output store (`output_root.OutputStore`) or a document folder from
what the user gave (today always a local path; the one place an object store such as s3:// would
be chosen)."""

from __future__ import annotations

import os
from pathlib import Path

from hpdparse.store.document_folder import DocumentFolder
from hpdparse.store.output_root import OutputStore


def open_output_store(location: str | os.PathLike[str]) -> OutputStore:
    """The output store at `location` (a local folder)."""
    from hpdparse.store.local import LocalOutputStore

    return LocalOutputStore(Path(location))


def open_document_folder(location: str | os.PathLike[str]) -> DocumentFolder:
    """The document folder at `location` (a local folder), e.g. for `hpdparse render`."""
    from hpdparse.store.local import LocalFolder

    return DocumentFolder(LocalFolder(Path(location)))
