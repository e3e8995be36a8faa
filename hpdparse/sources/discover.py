"""Find input files: explicit files, folders (recursive or not) and glob patterns, local or at a
URL. At a URL: an object, a prefix taken as a folder (its top level, or every object under it
with -r), or a glob pattern (`**` spans "folders" with -r); a prefix costs one LIST request
(paginated), a pattern one LIST per level it spans (fsspec's `glob`), an object one HEAD."""

from __future__ import annotations

import glob
import os
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from hpdparse.errors import InputError
from hpdparse.remote import filesystem, is_url, local_path_of, redact, scheme_of, storage_message
from hpdparse.sources.document import SUPPORTED_SUFFIXES
from hpdparse.sources.location import UrlSource, object_info

if TYPE_CHECKING:
    from fsspec import AbstractFileSystem


def discover_inputs(
    specs: Sequence[str], recursive: bool = False
) -> tuple[list[Path | UrlSource], list[InputError]]:
    """Expand files, folders and glob patterns into a list of input files.

    - A file named explicitly is taken whatever its suffix (opening it gives the error, if any).
    - A folder gives its PDF and image files (by suffix, any case), only its top level unless
      `recursive`; hidden files and folders (name starting with ".") are skipped.
    - A pattern (`*`, `?`, `[`) is expanded with `glob`; `**` spans folders when `recursive`.
      Matching files count only with a supported suffix; matching folders are expanded as above.
    Files are resolved and de-duplicated, kept in the order of `specs`, sorted within a folder or
    pattern. A spec that does not exist or matches nothing gives an `InputError` naming it.
    A URL (s3://bucket/prefix/, https://...) gives `UrlSource`s the same way
    (`discover_url`); StorageUsageError for a URL that cannot be used at all.
    """
    found: dict[Path | UrlSource, None] = {}
    errors: list[InputError] = []
    for spec in specs:
        discover = discover_url if is_url(spec) else _discover_local
        members, error = discover(spec, recursive)
        errors.extend([error] if error else [])
        found.update(dict.fromkeys(members))
    return list(found), errors


def _discover_local(spec: str, recursive: bool) -> tuple[list[Path], InputError | None]:
    """The input files a local `spec` names, and the error when it names none."""
    path = Path(local_path_of(spec)).expanduser()
    if path.is_file():
        return [path.resolve()], None
    members: list[Path] = []
    if path.is_dir():
        members = list(_folder_members(path, recursive))
        reason = "" if members else _empty_folder_reason(path, recursive)
    elif glob.has_magic(spec):
        members = list(_glob_members(spec, recursive))
        reason = "no PDF or image file matches this pattern"
    elif path.exists() or path.is_symlink():
        reason = "not a regular file or folder"
    else:
        reason = "no such file or folder"
    return members, None if members else InputError(f"{spec}: {reason}", path=spec)


def _is_supported(path: Path) -> bool:
    return path.suffix.lower() in SUPPORTED_SUFFIXES


def _folder_members(folder: Path, recursive: bool) -> Iterator[Path]:
    members: list[Path] = []
    if recursive:
        for root, dirs, files in os.walk(folder):
            dirs[:] = [d for d in dirs if not d.startswith(".")]
            members.extend(Path(root, f) for f in files if not f.startswith("."))
    else:
        try:
            members = [p for p in folder.iterdir() if not p.name.startswith(".")]
        except OSError:
            members = []
    for member in sorted(members, key=lambda p: p.relative_to(folder).parts):
        if _is_supported(member) and member.is_file():
            yield member.resolve()


def _empty_folder_reason(folder: Path, recursive: bool) -> str:
    if not os.access(folder, os.R_OK | os.X_OK):
        return "folder cannot be read (permission denied)"
    if not recursive and any(_folder_members(folder, True)):
        return "no PDF or image file in this folder (use -r to include subfolders)"
    return "no PDF or image file in this folder"


def _glob_members(pattern: str, recursive: bool) -> Iterator[Path]:
    for match in sorted(glob.glob(os.path.expanduser(pattern), recursive=recursive)):
        path = Path(match)
        if path.is_dir():
            yield from _folder_members(path, recursive)
        elif path.is_file() and _is_supported(path):
            yield path.resolve()


# --- at a URL ---


def discover_url(spec: str, recursive: bool) -> tuple[list[UrlSource], InputError | None]:
    """The input objects `spec` names, sorted, and the error when it names none."""
    fs, path = filesystem(spec)
    if scheme_of(spec) in ("http", "https"):
        return [UrlSource(spec)], None  # a web address is one file; opening it says the rest
    try:
        if glob.has_magic(path):
            members = _object_glob(fs, path, recursive, scheme_of(spec))
            if not members:
                return [], _url_error(spec, "no PDF or image file matches this pattern")
            return members, None
        info = object_info(fs, path)
        if info is None:
            return [], _url_error(spec, "no such file or folder")
        if info.kind != "directory":
            return [UrlSource(spec)], None
        members = _object_members(fs, path, recursive, scheme_of(spec))
        if not members:
            reason = "no PDF or image file in this folder"
            if not recursive and _object_members(fs, path, True, scheme_of(spec)):
                reason += " (use -r to include subfolders)"
            return [], _url_error(spec, reason)
        return members, None
    except InputError as exc:
        return [], exc
    except Exception as exc:
        return [], InputError(storage_message(spec, exc), path=redact(spec))


def _url_error(spec: str, reason: str) -> InputError:
    return InputError(f"{redact(spec)}: {reason}", path=redact(spec))


def _hidden(relative: str) -> bool:
    return any(part.startswith(".") for part in relative.split("/") if part)


def _key_supported(name: str) -> bool:
    dot = name.rfind(".")
    return dot > name.rfind("/") and name[dot:].lower() in SUPPORTED_SUFFIXES


def _url_of(fs: AbstractFileSystem, name: str, scheme: str) -> str:
    """The URL of object `name` in the scheme the user wrote: fsspec would write every az://
    object as abfs:// and every gcs:// one as gs://, and messages would name URLs never given."""
    url = fs.unstrip_protocol(name)
    return f"{scheme}://{url.split('://', 1)[1]}" if "://" in url else url


def _object_members(
    fs: AbstractFileSystem, path: str, recursive: bool, scheme: str
) -> list[UrlSource]:
    root = path.rstrip("/")
    if recursive:
        names = list(fs.find(root))
    else:
        names = [e["name"] for e in fs.ls(root, detail=True) if e.get("type") == "file"]
    members = []
    for name in sorted(names, key=lambda n: n.split("/")):
        relative = name[len(root) :].lstrip("/")
        if relative and not _hidden(relative) and _key_supported(name):
            members.append(UrlSource(_url_of(fs, name, scheme)))
    return members


def _object_glob(
    fs: AbstractFileSystem, pattern: str, recursive: bool, scheme: str
) -> list[UrlSource]:
    if not recursive:
        pattern = pattern.replace("**", "*")
    found: dict[UrlSource, None] = {}
    for name, info in sorted(fs.glob(pattern, detail=True).items()):
        if info.get("type") == "directory":
            for member in _object_members(fs, name, recursive, scheme):
                found.setdefault(member, None)
        elif _key_supported(name):
            found.setdefault(UrlSource(_url_of(fs, name, scheme)), None)
    return list(found)
