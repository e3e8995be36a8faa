"""Where an input is: a local `Path`, or a `UrlSource` (s3://bucket/key.pdf, https://...) that
answers the few questions the runner asks of a path (name, stem, suffix, absolute(), is_file())
and reads its object through fsspec (`hpdparse.remote`)."""

from __future__ import annotations

import os
from collections.abc import Callable
from datetime import datetime
from functools import total_ordering
from pathlib import Path
from typing import Any, TypeVar

from hpdparse.errors import InputError
from hpdparse.remote import filesystem, is_url, local_path_of, redact, storage_message

T = TypeVar("T")


@total_ordering
class UrlSource:
    """An input file at a URL. str() is the URL (credentials in it removed)."""

    def __init__(self, url: str) -> None:
        self.url = url

    def __str__(self) -> str:
        return redact(self.url)

    def __repr__(self) -> str:
        return f"UrlSource({str(self)!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, UrlSource) and other.url == self.url

    def __lt__(self, other: object) -> bool:
        return str(self) < str(other)

    def __hash__(self) -> int:
        return hash(("url", self.url))

    @property
    def name(self) -> str:
        return self.url.split("?", 1)[0].rstrip("/").rsplit("/", 1)[-1]

    @property
    def suffix(self) -> str:
        return Path(self.name).suffix

    @property
    def stem(self) -> str:
        return Path(self.name).stem

    def absolute(self) -> UrlSource:
        return self

    def is_file(self) -> bool:
        """True when the object exists (one HEAD request). InputError (one line naming the URL)
        when the store cannot tell (no credentials, access denied, unreachable...)."""
        info = self._request(lambda fs, path: _info_or_none(fs, path))
        return info is not None and info.get("type", "file") == "file"

    def stat(self) -> tuple[int, int]:
        """The object's size and last modification time in ns (0 when the store gives none); one
        HEAD request. InputError when it cannot be read."""
        info = self._request(lambda fs, path: fs.info(path))
        size = int(info.get("size") or 0)
        return size, _mtime_ns(info)

    def read_bytes(self) -> bytes:
        """The whole object (one GET). InputError (one line naming the URL) when it cannot be
        read."""
        return self._request(lambda fs, path: fs.cat_file(path))

    def download(self, target: Path) -> None:
        """Copy the object to the local file `target` (streamed). InputError when it cannot."""
        self._request(lambda fs, path: fs.get_file(path, str(target)))

    def _request(self, call: Callable[[Any, str], T]) -> T:
        fs, path = filesystem(self.url)
        try:
            return call(fs, path)
        except InputError:
            raise
        except Exception as exc:
            message = storage_message(self.url, exc)
            raise InputError(message, path=str(self)) from None


def _info_or_none(fs: Any, path: str) -> dict[str, Any] | None:
    try:
        return fs.info(path)
    except FileNotFoundError:
        return None


def _mtime_ns(info: dict[str, Any]) -> int:
    for key in ("LastModified", "last_modified", "updated", "mtime", "created"):
        value = info.get(key)
        if isinstance(value, datetime):
            return int(value.timestamp() * 1_000_000_000)
        if isinstance(value, (int, float)) and value > 0:
            return int(value * 1_000_000_000)
        if isinstance(value, str) and value:
            try:
                parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
            except ValueError:
                continue
            return int(parsed.timestamp() * 1_000_000_000)
    return 0


def source_location(text: str | os.PathLike[str]) -> Path | UrlSource:
    """The input at `text`: a UrlSource for a URL, else a local Path."""
    if isinstance(text, (UrlSource, Path)):
        return text
    text = str(text)
    return UrlSource(text) if is_url(text) else Path(local_path_of(text))
