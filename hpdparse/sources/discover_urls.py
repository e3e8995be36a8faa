"""Find input objects at a URL: an object, a prefix taken as a folder (its top level, or every
object under it with -r), or a glob pattern (`**` spans "folders" with -r), as `discover` does
for local paths. A prefix costs one LIST request (paginated), a pattern one LIST per level it
spans (fsspec's `glob`); an object one HEAD."""

from __future__ import annotations

from typing import TYPE_CHECKING

from hpdparse.errors import InputError
from hpdparse.remote import filesystem, redact, scheme_of, storage_message
from hpdparse.sources.document import SUPPORTED_SUFFIXES
from hpdparse.sources.location import UrlSource, object_info

if TYPE_CHECKING:
    from fsspec import AbstractFileSystem

_MAGIC = ("*", "?", "[")


def discover_url(spec: str, recursive: bool) -> tuple[list[UrlSource], InputError | None]:
    """The input objects `spec` names, sorted, and the error when it names none."""
    fs, path = filesystem(spec)
    if scheme_of(spec) in ("http", "https"):
        return [UrlSource(spec)], None  # a web address is one file; opening it says the rest
    try:
        if any(c in path for c in _MAGIC):
            members = _glob_members(fs, path, recursive, scheme_of(spec))
            if not members:
                return [], _error(spec, "no PDF or image file matches this pattern")
            return members, None
        info = object_info(fs, path)
        if info is None:
            return [], _error(spec, "no such file or folder")
        if info.kind != "directory":
            return [UrlSource(spec)], None
        members = _folder_members(fs, path, recursive, scheme_of(spec))
        if not members:
            reason = "no PDF or image file in this folder"
            if not recursive and _folder_members(fs, path, True, scheme_of(spec)):
                reason += " (use -r to include subfolders)"
            return [], _error(spec, reason)
        return members, None
    except InputError as exc:
        return [], exc
    except Exception as exc:
        return [], InputError(storage_message(spec, exc), path=redact(spec))


def _error(spec: str, reason: str) -> InputError:
    return InputError(f"{redact(spec)}: {reason}", path=redact(spec))


def _hidden(relative: str) -> bool:
    return any(part.startswith(".") for part in relative.split("/") if part)


def _supported(name: str) -> bool:
    dot = name.rfind(".")
    return dot > name.rfind("/") and name[dot:].lower() in SUPPORTED_SUFFIXES


def _url_of(fs: AbstractFileSystem, name: str, scheme: str) -> str:
    """The URL of object `name` in the scheme the user wrote: fsspec would write every az://
    object as abfs:// and every gcs:// one as gs://, and messages would name URLs never given."""
    url = fs.unstrip_protocol(name)
    return f"{scheme}://{url.split('://', 1)[1]}" if "://" in url else url


def _folder_members(
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
        if relative and not _hidden(relative) and _supported(name):
            members.append(UrlSource(_url_of(fs, name, scheme)))
    return members


def _glob_members(
    fs: AbstractFileSystem, pattern: str, recursive: bool, scheme: str
) -> list[UrlSource]:
    if not recursive:
        pattern = pattern.replace("**", "*")
    found: dict[UrlSource, None] = {}
    for name, info in sorted(fs.glob(pattern, detail=True).items()):
        if info.get("type") == "directory":
            for member in _folder_members(fs, name, recursive, scheme):
                found.setdefault(member, None)
        elif _supported(name):
            found.setdefault(UrlSource(_url_of(fs, name, scheme)), None)
    return list(found)
