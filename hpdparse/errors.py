"""Exceptions that end up as one-line messages for the user."""

from __future__ import annotations

import os


class HpdparseError(Exception):
    """Base class. str(error) is a complete one-line message for the user; `path` is the file or
    folder it is about (as the user named it), None when it is about none."""

    def __init__(self, message: str, *, path: str | os.PathLike[str] | object = None) -> None:
        super().__init__(message)
        # A path, or a source at a URL (its str() is the URL).
        self.path: str | None = None if path is None else str(path)


class InputError(HpdparseError):
    """An input file cannot be read, opened, decrypted or rasterized."""


class EngineError(HpdparseError):
    """The engine cannot start or cannot go on (model missing, server down for good...)."""


class OutputError(HpdparseError):
    """An output folder or file cannot be written."""
