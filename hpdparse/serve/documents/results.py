"""A finished document's files as the routes answer them: one of convert's files, the zip of
its folder, its Markdown rendered as HTML (the web page), its review page."""

from __future__ import annotations

import asyncio
import re
import zipfile
from pathlib import Path

from starlette.responses import FileResponse, HTMLResponse, Response

from hpdparse.serve.documents.store import DONE, DocumentJob, DocumentStore
from hpdparse.store.atomic import atomic_write_bytes
from hpdparse.store.layout import (
    chunks_name,
    docling_name,
    json_name,
    markdown_name,
    review_html_name,
)
from hpdparse.wire import WireError

RESULT_FORMATS = ("markdown", "json", "docling", "chunks", "zip", "html")
_FILES = {
    "markdown": (markdown_name, "text/markdown; charset=utf-8"),
    "json": (json_name, "application/json"),
    "docling": (docling_name, "application/json"),
    "chunks": (chunks_name, "application/jsonl"),
}


async def result_response(store: DocumentStore, job: DocumentJob, wanted: str) -> Response:
    """The document's result in format `wanted`; 409 while it has none."""
    doc_dir = store.document_dir(job)
    if job.status != DONE or doc_dir is None:
        reason = f": {job.error}" if job.error else ""
        raise WireError(409, f"document {job.id} is {job.status}{reason}; it has no result")
    stem = doc_dir.name
    if wanted == "zip":
        path = await asyncio.to_thread(_zip, store.folder(job.id), doc_dir)
        return FileResponse(path, media_type="application/zip", filename=f"{stem}.zip")
    if wanted == "html":
        return HTMLResponse(await asyncio.to_thread(_rendered, doc_dir))
    namer, media = _FILES[wanted]
    path = doc_dir / namer(stem)
    if not path.is_file():
        raise WireError(404, f"document {job.id} has no {path.name}: ask for it with {wanted}=true")
    return FileResponse(path, media_type=media)


def _zip(folder: Path, doc_dir: Path) -> Path:
    """The document's folder as a zip (made once, atomically); what `convert` wrote, the review
    page left out."""
    target = folder / "result.zip"
    if target.is_file():
        return target
    stem = doc_dir.name
    skip = {review_html_name(stem)}
    scratch = folder / ".result.zip.part"
    with zipfile.ZipFile(scratch, "w", zipfile.ZIP_DEFLATED) as archive:
        for path in sorted(doc_dir.rglob("*")):
            if path.is_file() and path.name not in skip and not path.name.startswith("."):
                archive.write(path, f"{stem}/{path.relative_to(doc_dir).as_posix()}")
    atomic_write_bytes(target, scratch.read_bytes())
    scratch.unlink()
    return target


_HTML_TABLE = re.compile(r"(<table\b.*?</table>)", re.DOTALL | re.IGNORECASE)


def _rendered(doc_dir: Path) -> str:
    """The Markdown as the review page renders it: markdown-it without raw HTML, tables rebuilt
    from their cells, math as MathML, the figures' crops embedded (hpdparse.review.blocks)."""
    from hpdparse.review.blocks import CROP_NAME, crop_html, make_markdown, table_html

    md = make_markdown()
    figure_line = re.compile(rf"^!\[[^\]\n]*\]\(({CROP_NAME.pattern})\)[ \t]*$", re.MULTILINE)
    out = []
    text = (doc_dir / markdown_name(doc_dir.name)).read_text("utf-8")
    for index, part in enumerate(_HTML_TABLE.split(text)):
        if index % 2:
            out.append(table_html(md, part))
            continue
        for number, piece in enumerate(figure_line.split(part)):
            out.append(crop_html(doc_dir, piece) if number % 2 else md.render(piece))
    return "".join(out)


def review_page(doc_dir: Path, password: str | None) -> Path:
    """Write the document's review page (hpdparse review) and give its path."""
    from hpdparse.review.command import review as write_review

    outcome = write_review(doc_dir, password=password)
    if not outcome.pages:
        raise WireError(500, "; ".join(outcome.problems) or "no review page was written")
    return outcome.pages[0]
