"""Per-document output folders: atomic writes, raw pages, resume state and folder names.

Layout of one document folder (``OUT/<stem>/``)::

    <stem>.md              written last: the document is finished only when it exists
    <stem>.json            blocks per page (from the renderer)
    images/page-0003-figure-01.png
    raw/page-0003.txt      the raw model text, exactly; written first
    raw/page-0003.json     its metadata (engine, model, prompt, dpi, sha256 of the .txt ...),
                           written after the .txt: a page is reusable only when its .json exists
                           and its sha256 matches the .txt
    raw/document.json      resume state: the source (path, size, sha256), the settings of the run
                           that owns the folder, its status and the failed pages

Every file goes through `atomic_write_bytes` (temporary file in the same folder, fsync, rename), so
a SIGKILL at any moment leaves either the old file, the new file, or a stray temporary file that
`remove_stray_temporaries` deletes on the next run.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hpdparse.errors import OutputError

STATE_FORMAT = 1
STATE_FILE = "document.json"
RAW_DIR = "raw"
IMAGES_DIR = "images"
TMP_SUFFIX = ".hpdtmp"

STATUS_IN_PROGRESS = "in-progress"
STATUS_CONVERTED = "converted"
STATUS_PARTIAL = "partial"

_RAW_NAME = re.compile(r"^page-(\d{4,})\.(txt|json)$")


# --- atomic writes -----------------------------------------------------------------------------


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Write `data` to `path` so that readers see the old file or the whole new one, never a
    part: a temporary file in the same folder, fsync, then os.replace."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}{TMP_SUFFIX}")
    try:
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise
    _fsync_dir(path.parent)


def atomic_write_text(path: Path, text: str) -> None:
    atomic_write_bytes(path, text.encode("utf-8"))


def atomic_write_json(path: Path, obj: Any) -> None:
    atomic_write_text(path, json.dumps(obj, ensure_ascii=False, indent=2, sort_keys=False) + "\n")


def _fsync_dir(folder: Path) -> None:
    # Makes the rename itself durable; not possible on every platform, so best effort.
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def remove_stray_temporaries(doc_dir: Path) -> None:
    """Delete temporary files left by a run that was killed in the middle of a write."""
    for folder in (doc_dir, doc_dir / RAW_DIR, doc_dir / IMAGES_DIR):
        if folder.is_dir():
            for tmp in folder.glob(f".*{TMP_SUFFIX}"):
                with contextlib.suppress(OSError):
                    tmp.unlink()


def sha256_text(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


# --- source identity ---------------------------------------------------------------------------


@dataclass(frozen=True)
class SourceIdentity:
    """Enough to tell whether the source file changed since raw pages were written."""

    path: str  # absolute
    size: int
    mtime_ns: int
    sha256: str

    @classmethod
    def of(cls, path: Path) -> SourceIdentity:
        path = Path(path).absolute()
        st = path.stat()
        return cls(str(path), st.st_size, st.st_mtime_ns, sha256_file(path))

    def matches_file(self, path: Path) -> bool:
        """True when `path` still has the content this identity was taken from (size and mtime
        first, the sha256 only when they differ)."""
        try:
            st = Path(path).stat()
        except OSError:
            return False
        if st.st_size != self.size:
            return False
        if st.st_mtime_ns == self.mtime_ns:
            return True
        try:
            return sha256_file(Path(path)) == self.sha256
        except OSError:
            return False


# --- document folders --------------------------------------------------------------------------


def _short_hash(path: Path) -> str:
    return hashlib.sha256(str(Path(path).absolute()).encode("utf-8")).hexdigest()[:8]


def read_state(doc_dir: Path) -> dict[str, Any] | None:
    """The resume state of a document folder, or None when there is none (or it is unreadable)."""
    try:
        with open(doc_dir / RAW_DIR / STATE_FILE, encoding="utf-8") as f:
            state = json.load(f)
    except (OSError, ValueError):
        return None
    if not isinstance(state, dict) or state.get("format") != STATE_FORMAT:
        return None
    return state


def assign_output_dirs(sources: list[Path], out_dir: Path) -> dict[Path, Path]:
    """Give every source its own folder under `out_dir`, deterministically.

    A source gets ``<stem>`` unless another source already owns that folder: owned by the source
    recorded in the folder's ``raw/document.json`` (from any earlier run into the same OUT), or
    claimed earlier in this run (sources taken in sorted order of absolute path). Otherwise it gets
    ``<stem>-<first 8 hex digits of sha256(absolute path)>``. So a file keeps its folder when the
    input list changes, and two files with the same stem never share one.
    """
    ordered = sorted({Path(s).absolute() for s in sources}, key=str)
    owners: dict[Path, str | None] = {}
    for src in ordered:
        state = read_state(out_dir / _stem_of(src))
        owners[src] = state.get("source") if state else None
    result: dict[Path, Path] = {}
    claimed: set[str] = set()
    # Folders already owned by one of these sources go to their owners first.
    for src in ordered:
        if owners[src] == str(src):
            result[src] = out_dir / _stem_of(src)
            claimed.add(_stem_of(src))
    for src in ordered:
        if src in result:
            continue
        stem = _stem_of(src)
        free = stem not in claimed and owners[src] is None
        name = stem if free else f"{stem}-{_short_hash(src)}"
        claimed.add(name)
        result[src] = out_dir / name
    return {Path(s): result[Path(s).absolute()] for s in sources}


def _stem_of(path: Path) -> str:
    return path.stem or path.name or "document"


def raw_txt_path(doc_dir: Path, number: int) -> Path:
    return doc_dir / RAW_DIR / f"page-{number:04d}.txt"


def raw_meta_path(doc_dir: Path, number: int) -> Path:
    return doc_dir / RAW_DIR / f"page-{number:04d}.json"


def markdown_path(doc_dir: Path, stem: str) -> Path:
    return doc_dir / f"{stem}.md"


def json_path(doc_dir: Path, stem: str) -> Path:
    return doc_dir / f"{stem}.json"


def prepare_doc_dir(doc_dir: Path) -> None:
    """Create the document folder and its raw/ folder; OutputError (one line) when impossible."""
    try:
        (doc_dir / RAW_DIR).mkdir(parents=True, exist_ok=True)
        probe = doc_dir / RAW_DIR / f".probe.{os.getpid()}{TMP_SUFFIX}"
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as exc:
        raise OutputError(f"{doc_dir}: cannot write the output folder: {_os_reason(exc)}") from exc
    remove_stray_temporaries(doc_dir)


def _os_reason(exc: OSError) -> str:
    return exc.strerror or exc.__class__.__name__


def write_raw_page(doc_dir: Path, number: int, text: str, meta: dict[str, Any]) -> None:
    """Save one finished page: the text first, then its metadata with the text's sha256 (the
    metadata file is the commit point of the page)."""
    meta = dict(meta)
    meta["sha256"] = sha256_text(text)
    atomic_write_text(raw_txt_path(doc_dir, number), text)
    atomic_write_json(raw_meta_path(doc_dir, number), meta)


def remove_raw_page(doc_dir: Path, number: int) -> None:
    """Forget a saved page (metadata first, so a crash in between leaves it unusable, not wrong)."""
    for path in (raw_meta_path(doc_dir, number), raw_txt_path(doc_dir, number)):
        with contextlib.suppress(FileNotFoundError):
            path.unlink()


@dataclass
class RawPage:
    number: int
    text: str
    meta: dict[str, Any]


def read_raw_page(doc_dir: Path, number: int) -> RawPage | None:
    """A saved page whose metadata exists and whose sha256 matches its text; None otherwise."""
    try:
        with open(raw_meta_path(doc_dir, number), encoding="utf-8") as f:
            meta = json.load(f)
        text = raw_txt_path(doc_dir, number).read_bytes().decode("utf-8")
    except (OSError, ValueError):
        return None
    if not isinstance(meta, dict) or meta.get("sha256") != sha256_text(text):
        return None
    return RawPage(number, text, meta)


def raw_page_reusable(page: RawPage | None, reuse_key: dict[str, Any], dpi: int) -> bool:
    """True when a saved page was made by the same model, revision, prompt and max tokens, from a
    page rendered at the same DPI."""
    if page is None:
        return False
    return page.meta.get("reuse_key") == reuse_key and page.meta.get("requested_dpi") == dpi


def saved_page_numbers(doc_dir: Path) -> list[int]:
    """Page numbers that have a raw metadata file (valid or not)."""
    folder = doc_dir / RAW_DIR
    if not folder.is_dir():
        return []
    numbers = set()
    for entry in os.scandir(folder):
        m = _RAW_NAME.match(entry.name)
        if m and m.group(2) == "json":
            numbers.add(int(m.group(1)))
    return sorted(numbers)


def clear_doc_dir(doc_dir: Path, stem: str) -> None:
    """--overwrite: drop the finished Markdown first (so the folder reads as unfinished), then
    everything else this tool wrote there."""
    for path in (markdown_path(doc_dir, stem), json_path(doc_dir, stem)):
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
    for sub in (IMAGES_DIR, RAW_DIR):
        shutil.rmtree(doc_dir / sub, ignore_errors=True)


def remove_images(doc_dir: Path) -> None:
    shutil.rmtree(doc_dir / IMAGES_DIR, ignore_errors=True)


def remove_state(doc_dir: Path) -> None:
    with contextlib.suppress(FileNotFoundError):
        (doc_dir / RAW_DIR / STATE_FILE).unlink()


def remove_if_empty(doc_dir: Path) -> None:
    """Remove a document folder that holds nothing but our (empty) raw/ folder."""
    with contextlib.suppress(OSError):
        (doc_dir / RAW_DIR).rmdir()
    with contextlib.suppress(OSError):
        doc_dir.rmdir()


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
    reuse_key: dict[str, Any]
    render_options: dict[str, Any]
    status: str = STATUS_IN_PROGRESS
    failed_pages: dict[int, str] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "format": STATE_FORMAT,
            "source": self.source.path,
            "source_size": self.source.size,
            "source_mtime_ns": self.source.mtime_ns,
            "source_sha256": self.source.sha256,
            "stem": self.stem,
            "page_count": self.page_count,
            "pages_spec": self.pages_spec,
            "selected_pages": self.selected,
            "dpi": self.dpi,
            "engine": self.engine,
            "model": self.model,
            "revision": self.revision,
            "reuse_key": self.reuse_key,
            "render_options": self.render_options,
            "status": self.status,
            "failed_pages": {str(k): v for k, v in sorted(self.failed_pages.items())},
        }

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
                reuse_key=data.get("reuse_key", {}),
                render_options=data.get("render_options", {}),
                status=data.get("status", STATUS_IN_PROGRESS),
                failed_pages={int(k): v for k, v in data.get("failed_pages", {}).items()},
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise OutputError(f"damaged resume state ({exc.__class__.__name__}: {exc})") from exc

    def save(self, doc_dir: Path) -> None:
        atomic_write_json(doc_dir / RAW_DIR / STATE_FILE, self.to_json())


def load_state(doc_dir: Path) -> DocumentState | None:
    data = read_state(doc_dir)
    if data is None:
        return None
    try:
        return DocumentState.from_json(data)
    except OutputError:
        return None
