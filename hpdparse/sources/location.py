"""Where an input is: a local `Path`, or a `UrlSource` (s3://bucket/key.pdf, https://...) that
answers the few questions the runner asks of a path (name, stem, suffix, absolute(), is_file())
and reads its object through fsspec (`hpdparse.remote`)."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime
from functools import total_ordering
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from hpdparse.errors import InputError
from hpdparse.remote import filesystem, is_url, local_path_of, redact, storage_message

if TYPE_CHECKING:
    from fsspec import AbstractFileSystem

T = TypeVar("T")

LARGE_OBJECT_BYTES = 256 << 20
"""Objects up to this size are read into memory; larger ones go through a temporary file."""

_opened_modules: dict[str, None] = {}  # the modules of the input file systems used, in order


@dataclass(frozen=True)
class ObjectInfo:
    """What a store says of an object (fsspec's `info`): its kind ("file" when the store
    does not say, "directory" for a prefix), its size, its last modification time in ns (0 when
    the store gives none)."""

    kind: str
    size: int
    mtime_ns: int


@total_ordering
class UrlSource:
    """An input file at a URL. str() is the URL (credentials in it removed)."""

    def __init__(self, url: str) -> None:
        self.url = url
        self._held = False  # within held(): the answers below are kept
        self._info: ObjectInfo | None = None
        self._data: bytes | None = None

    def __reduce__(self) -> tuple[type[UrlSource], tuple[str]]:
        return UrlSource, (self.url,)  # the URL alone: what is held stays in this process

    @contextlib.contextmanager
    def held(self) -> Iterator[UrlSource]:
        """Within: the object is asked about once (one HEAD) and, up to LARGE_OBJECT_BYTES, read
        once (one GET), however often `is_file`, `stat` and `read_bytes` are called; planning
        checks the object, takes its sha256 and counts its pages from one read. Forgotten on
        exit."""
        self._held = True
        try:
            yield self
        finally:
            self._held, self._info, self._data = False, None, None

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
        info = self._object_info()
        return info is not None and info.kind == "file"

    def stat(self) -> tuple[int, int]:
        """The object's size and last modification time in ns (0 when the store gives none); one
        HEAD request. InputError when it cannot be read."""
        info = self._object_info()
        if info is None:
            raise InputError(storage_message(self.url, FileNotFoundError()), path=str(self))
        return info.size, info.mtime_ns

    def read_bytes(self) -> bytes:
        """The whole object (one GET). InputError (one line naming the URL) when it cannot be
        read."""
        if self._data is not None:
            return self._data
        data = self._request(lambda fs, path: fs.cat_file(path))
        if self._held and len(data) <= LARGE_OBJECT_BYTES:
            self._data = data
        return data

    def _object_info(self) -> ObjectInfo | None:
        info = self._info or self._request(object_info)
        if self._held:
            self._info = info
        return info

    def download(self, target: Path) -> None:
        """Copy the object to the local file `target` (streamed). InputError when it cannot."""
        self._request(lambda fs, path: fs.get_file(path, str(target)))

    def _request(self, call: Callable[[AbstractFileSystem, str], T]) -> T:
        fs, path = filesystem(self.url)
        _opened_modules[type(fs).__module__] = None
        try:
            return call(fs, path)
        except InputError:
            raise
        except Exception as exc:
            message = storage_message(self.url, exc)
            raise InputError(message, path=str(self)) from None


def object_info(fs: AbstractFileSystem, path: str) -> ObjectInfo | None:
    """What the store says of the object at `path` (one HEAD); None when there is none."""
    try:
        info = fs.info(path)
    except FileNotFoundError:
        return None
    return ObjectInfo(info.get("type", "file"), int(info.get("size") or 0), _mtime_ns(info))


def _mtime_ns(info: Mapping[str, object]) -> int:
    for key in ("LastModified", "last_modified", "updated", "mtime", "created"):
        value = info.get(key)
        if isinstance(value, str) and value:
            with contextlib.suppress(ValueError):
                value = datetime.fromisoformat(value.replace("Z", "+00:00"))
        if isinstance(value, datetime):
            return int(value.timestamp() * 1_000_000_000)
        if isinstance(value, (int, float)) and value > 0:
            return int(value * 1_000_000_000)
    return 0


def input_filesystem_modules() -> list[str]:
    """The modules of the fsspec file systems (`s3fs.core`, ...) that inputs at URLs have been
    read through in this process: the rasterizer workers read them too, and import each once
    (0.4-0.7 s of CPU, with its cloud's client library) unless their parent's forkserver has."""
    return list(_opened_modules)


def held_once(source: Path | UrlSource) -> contextlib.AbstractContextManager[object]:
    """`UrlSource.held` for an object at a URL; nothing for a local file."""
    return source.held() if isinstance(source, UrlSource) else contextlib.nullcontext()


def source_location(text: str | os.PathLike[str]) -> Path | UrlSource:
    """The input at `text`: a UrlSource for a URL, else a local Path."""
    if isinstance(text, (UrlSource, Path)):
        return text
    text = str(text)
    return UrlSource(text) if is_url(text) else Path(local_path_of(text))
