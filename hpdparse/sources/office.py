"""Office and HTML files (`document.OFFICE_SUFFIXES`) as PDFs, converted by LibreOffice.

`soffice --headless --convert-to pdf` runs on a private copy of the file (LibreOffice writes lock
files beside what it opens) with a LibreOffice profile of this process's own (two LibreOffice
processes sharing a profile hand their work to each other, or wait), in a process group of its
own that is killed when it runs past the timeout.

A conversion run keeps the PDFs in a folder of its own (`use_conversion_folder`, in the main
process and in every rasterizer process), named by a digest of the file's bytes: a document is
converted once, by whichever process opens it first (the runner has a rasterizer process do it,
ahead of the document's turn), and every process after that opens the same PDF. Without such a
folder (`hpdparse render`, the API's `open_source`) each opening converts the file into a
temporary folder that is removed at once.

LibreOffice takes files it cannot read as plain text (random bytes named .docx come out as a PDF
of garbage), so the container is checked first: OOXML and OpenDocument files must be ZIP files
with the parts of their format; an encrypted one (a password-protected Office file) is named as
such.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import os
import shutil
import signal
import subprocess
import tempfile
import zipfile
from collections.abc import Iterator
from pathlib import Path

from hpdparse.errors import InputError
from hpdparse.sources.document import OFFICE_SUFFIXES, Content
from hpdparse.sources.location import UrlSource

__all__ = [
    "DEFAULT_CONVERT_TIMEOUT",
    "OFFICE_SUFFIXES",
    "converted_pdf",
    "use_conversion_folder",
]

DEFAULT_CONVERT_TIMEOUT = 120.0
"""Seconds LibreOffice may take to convert one file before it is killed and the file fails."""

_OOXML = {".docx": "DOCX", ".xlsx": "XLSX", ".pptx": "PPTX"}
_ODF = {".odt": "ODT", ".ods": "ODS", ".odp": "ODP"}
_LEGACY = {".doc": "DOC", ".xls": "XLS", ".ppt": "PPT"}
_CFB_MAGIC = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"  # OLE compound file: legacy or encrypted Office
_ENCRYPTION_INFO = "EncryptionInfo".encode("utf-16-le")
_PACKAGE = {  # what LibreOffice needs per kind of file (Debian/Ubuntu package names)
    **dict.fromkeys((".xls", ".xlsx", ".ods"), "libreoffice-calc-nogui"),
    **dict.fromkeys((".ppt", ".pptx", ".odp"), "libreoffice-impress-nogui"),
}

_folder: Path | None = None
_timeout: float = DEFAULT_CONVERT_TIMEOUT


def use_conversion_folder(folder: Path | None, timeout: float = DEFAULT_CONVERT_TIMEOUT) -> None:
    """Keep the PDFs this process converts in `folder` (None: a temporary folder per opening),
    each conversion within `timeout` seconds."""
    global _folder, _timeout
    _folder, _timeout = folder, timeout


@contextlib.contextmanager
def converted_pdf(path: Path | UrlSource, content: Content = None) -> Iterator[Path]:
    """The PDF of the Office or HTML file at `path` (its bytes or a copy in `content`, as
    `open_source` has it), for the time of the `with` block; converted now unless the
    conversion folder has it. InputError (one line naming `path`) when it cannot be converted."""
    data = _read(path, content)
    suffix = path.suffix.lower()
    _check_container(path, suffix, data)
    if _folder is not None:
        target = _folder / f"{hashlib.sha256(data).hexdigest()[:32]}.pdf"
        if not target.is_file():
            _convert(path, suffix, data, _folder, _folder / f"profile-{os.getpid()}", target)
        yield target
        return
    with tempfile.TemporaryDirectory(prefix="hpdparse-convert-") as scratch:
        target = Path(scratch) / "converted.pdf"
        _convert(path, suffix, data, Path(scratch), Path(scratch) / "profile", target)
        yield target


def _read(path: Path | UrlSource, content: Content) -> bytes:
    if isinstance(content, bytes):
        return content
    try:
        return (content or path).read_bytes()  # a path, or an object at a URL
    except FileNotFoundError:
        raise InputError(f"{path}: no such file", path=path) from None
    except OSError as error:
        raise InputError(f"{path}: cannot be read ({error.strerror or error})", path=path) from None


def _check_container(path: Path | UrlSource, suffix: str, data: bytes) -> None:
    """Refuse what LibreOffice would take as plain text, and name password-protected files."""
    if not data:
        raise InputError(f"{path}: empty file (0 bytes)", path=path)
    kind = _OOXML.get(suffix) or _ODF.get(suffix)
    if kind is not None:
        if data.startswith(_CFB_MAGIC) and _ENCRYPTION_INFO in data:
            raise InputError(_protected(path), path=path)
        names = _zip_names(data)
        needed = "[Content_Types].xml" if suffix in _OOXML else "content.xml"
        if names is None or needed not in names:
            raise _not_valid(path, kind)
        if suffix in _ODF and _odf_encrypted(data):
            raise InputError(_protected(path), path=path)
    elif (
        suffix in _LEGACY
        and not data.startswith(_CFB_MAGIC)
        and not _text_starts(data, b"{\\rtf", b"<")
    ):
        # Word and Excel also save RTF, HTML and XML under .doc and .xls names
        raise _not_valid(path, _LEGACY[suffix])
    elif suffix == ".rtf" and not _text_starts(data, b"{\\rtf"):
        raise InputError(f"{path}: not an RTF file (it does not start with {{\\rtf)", path=path)


def _not_valid(path: Path | UrlSource, kind: str) -> InputError:
    return InputError(f"{path}: not a valid {kind} file (damaged, or another format)", path=path)


def _text_starts(data: bytes, *starts: bytes) -> bool:
    return data[:4096].lstrip(b"\xef\xbb\xbf \t\r\n").startswith(starts)


def _zip_names(data: bytes) -> set[str] | None:
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            return set(archive.namelist())
    except (zipfile.BadZipFile, OSError, ValueError):
        return None


def _odf_encrypted(data: bytes) -> bool:
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            return b"encryption-data" in archive.read("META-INF/manifest.xml")
    except (KeyError, zipfile.BadZipFile, OSError, ValueError):
        return False


def _protected(path: Path | UrlSource) -> str:
    return f"{path}: the Office file is protected by a password: save it without one to convert it"


def soffice_command() -> str | None:
    """LibreOffice's `soffice` program, or None where it is not installed."""
    found = shutil.which("soffice") or shutil.which("libreoffice")
    mac = "/Applications/LibreOffice.app/Contents/MacOS/soffice"
    return found or (mac if os.path.isfile(mac) else None)


def _convert(
    path: Path | UrlSource, suffix: str, data: bytes, workdir: Path, profile: Path, target: Path
) -> None:
    """Convert `data` (the file at `path`) into the PDF `target`, atomically."""
    soffice = soffice_command()
    if soffice is None:
        package = _PACKAGE.get(suffix, "libreoffice-writer-nogui")
        raise InputError(
            f"{path}: LibreOffice is needed for {suffix} files: install it (Debian/Ubuntu: "
            f"apt-get install {package}; elsewhere: https://www.libreoffice.org/download)",
            path=path,
        )
    with tempfile.TemporaryDirectory(prefix="job-", dir=workdir) as job:
        source = Path(job) / f"document{suffix}"
        source.write_bytes(data)
        out = Path(job) / "out"
        command = [
            soffice,
            "--headless",
            "--norestore",
            "--nolockcheck",
            f"-env:UserInstallation={profile.absolute().as_uri()}",
            "--convert-to",
            "pdf",
            "--outdir",
            str(out),
            str(source),
        ]
        failure = _run(command, _timeout)
        pdf = out / "document.pdf"
        if failure is None and not pdf.is_file():
            failure = "LibreOffice could not open it (damaged, or protected by a password)"
        if failure is not None:
            raise InputError(f"{path}: cannot be converted to PDF: {failure}", path=path)
        os.replace(pdf, target)  # the folder's name is the whole PDF or nothing


def _run(command: list[str], timeout: float) -> str | None:
    """Run LibreOffice in a process group of its own; why it failed, or None."""
    try:
        process = subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    except OSError as error:
        return f"LibreOffice could not be started ({error.strerror or error})"
    try:
        output, _ = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.communicate()
        return f"LibreOffice took more than {timeout:g} s (--convert-timeout)"
    finally:
        with contextlib.suppress(ProcessLookupError):  # a helper it left behind
            os.killpg(process.pid, signal.SIGKILL)
    if process.returncode != 0:
        last = (output or b"").decode(errors="replace").strip().splitlines()[-1:] or ["no output"]
        return f"LibreOffice failed (exit status {process.returncode}: {last[0]})"
    return None
