"""Paths inside a document folder and the folder-level operations (create, clear, tidy)."""

from __future__ import annotations

import contextlib
import os
import shutil
from pathlib import Path

from hpdparse.errors import OutputError
from hpdparse.store.atomic import TMP_SUFFIX

RAW_DIR = "raw"

IMAGES_DIR = "images"

STATE_FILE = "document.json"


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
        raise OutputError(f"{doc_dir}: cannot write the output folder: {os_reason(exc)}") from exc
    remove_stray_temporaries(doc_dir)


def os_reason(exc: OSError) -> str:
    return exc.strerror or exc.__class__.__name__


def remove_stray_temporaries(doc_dir: Path) -> None:
    """Delete temporary files left by a run that was killed in the middle of a write."""
    for folder in (doc_dir, doc_dir / RAW_DIR, doc_dir / IMAGES_DIR):
        if folder.is_dir():
            for tmp in folder.glob(f".*{TMP_SUFFIX}"):
                with contextlib.suppress(OSError):
                    tmp.unlink()


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


def remove_if_empty(doc_dir: Path) -> None:
    """Remove a document folder that holds nothing but our (empty) raw/ folder."""
    with contextlib.suppress(OSError):
        (doc_dir / RAW_DIR).rmdir()
    with contextlib.suppress(OSError):
        doc_dir.rmdir()
