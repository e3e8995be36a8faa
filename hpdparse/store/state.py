"""Resume state (raw/document.json): who owns a document folder, the settings of the run that
wrote it, its status and its failed pages; and the source file's identity."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import astuple, dataclass, field, fields
from pathlib import Path
from typing import Any

from hpdparse.engines.base import DecodeKey
from hpdparse.errors import HpdparseError, OutputError
from hpdparse.sources.location import UrlSource
from hpdparse.store.atomic import sha256_file
from hpdparse.store.statuses import STATUS_IN_PROGRESS

STATE_FORMAT = 1
SOURCE_KEYS = ("source", "source_size", "source_mtime_ns", "source_sha256")
JSON_NAMES = {"selected": "selected_pages"}  # a field's JSON key where it is not its name


@dataclass(frozen=True)
class SourceIdentity:
    """Enough to tell whether the source file changed since raw pages were written."""

    path: str  # absolute
    size: int
    mtime_ns: int
    sha256: str

    @classmethod
    def of(cls, path: Path | UrlSource) -> SourceIdentity:
        """The identity of the file at `path` (OSError), or of an object at a URL (InputError)."""
        if not isinstance(path, UrlSource):
            path = Path(path).absolute()
        size, mtime_ns, digest = _facts(path)
        return cls(str(path), size, mtime_ns, digest())

    def matches_file(self, path: Path | UrlSource) -> bool:
        """True when `path` still has the content this identity was taken from (size and mtime
        first, the sha256 only when they differ)."""
        try:
            size, mtime_ns, digest = _facts(path)
            if size != self.size:
                return False
            return mtime_ns == self.mtime_ns or digest() == self.sha256
        except (OSError, HpdparseError):
            return False


def _facts(path: Path | UrlSource) -> tuple[int, int, Callable[[], str]]:
    """The size and modification time (ns) of a file or object, and how to take its sha256."""
    if isinstance(path, UrlSource):
        size, mtime_ns = path.stat()
        return size, mtime_ns, lambda: hashlib.sha256(path.read_bytes()).hexdigest()
    st = Path(path).stat()
    return st.st_size, st.st_mtime_ns, lambda: sha256_file(Path(path))


@dataclass
class DocumentState:
    """What raw/document.json holds: who owns the folder and what the last run asked for."""

    source: SourceIdentity
    stem: str
    page_count: int
    pages_spec: str | None
    selected: list[int]
    dpi: int
    engine: str
    model: str
    revision: str | None
    reuse_key: DecodeKey | None  # None in a state that holds none (never reused then)
    render_options: dict[str, str | int | bool | None]  # markdown.render.RenderOptions as JSON
    status: str = STATUS_IN_PROGRESS
    failed_pages: dict[int, str] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """The fields in their order (the source's flattened, `selected` as "selected_pages")."""
        data = {"format": STATE_FORMAT, **dict(zip(SOURCE_KEYS, astuple(self.source), strict=True))}
        for item in fields(self)[1:]:
            data[JSON_NAMES.get(item.name, item.name)] = getattr(self, item.name)
        data["reuse_key"] = self.reuse_key.to_json() if self.reuse_key else {}
        data["failed_pages"] = {str(k): v for k, v in sorted(self.failed_pages.items())}
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> DocumentState:
        try:
            return cls(
                source=SourceIdentity(
                    data["source"],
                    int(data["source_size"]),
                    int(data["source_mtime_ns"]),
                    data["source_sha256"],
                ),
                stem=data["stem"],
                page_count=int(data["page_count"]),
                pages_spec=data.get("pages_spec"),
                selected=[int(n) for n in data["selected_pages"]],
                dpi=int(data["dpi"]),
                engine=data.get("engine", ""),
                model=data.get("model", ""),
                revision=data.get("revision"),
                reuse_key=DecodeKey.from_json(data.get("reuse_key")),
                render_options=data.get("render_options", {}),
                status=data.get("status", STATUS_IN_PROGRESS),
                failed_pages={int(k): v for k, v in data.get("failed_pages", {}).items()},
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise OutputError(f"damaged resume state ({exc.__class__.__name__}: {exc})") from exc
