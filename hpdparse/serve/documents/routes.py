"""The document routes of `hpdparse serve` (docs/service.md describes them for users):

    POST   /v1/documents               upload files (multipart, field "file") or {"url": ...}
    GET    /v1/documents               the caller's documents, newest first, paginated
    GET    /v1/documents/{id}          status, pages, the one-line error, timings, confidence
    GET    /v1/documents/{id}/events   server-sent events until the document ends
    GET    /v1/documents/{id}/result   ?format=markdown|json|docling|chunks|zip|html
    GET    /v1/documents/{id}/review   the review page (hpdparse review) of the document
    DELETE /v1/documents/{id}          cancel a queued or running document, or delete it
    POST   /v1/convert                 upload and wait (up to --sync-timeout) for the result
    GET    /openapi.json               the OpenAPI 3 description of these routes
    GET    /                           the web page (page.html: no build step, no network)

Errors are the server's OpenAI-style error bodies. A caller sees only the documents its API key
uploaded (every key its own); an uploaded file's name is only ever a file name in its
document's own folder.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from importlib import resources
from pathlib import Path

from starlette.datastructures import UploadFile
from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from hpdparse.remote import is_url
from hpdparse.serve.app import Service, State, check_open, limited, route
from hpdparse.serve.auth import bearer_token
from hpdparse.serve.documents.options import OptionError, read_options
from hpdparse.serve.documents.results import RESULT_FORMATS, result_response, review_page
from hpdparse.serve.documents.runner import pages_over_limit
from hpdparse.serve.documents.store import (
    DONE,
    FINAL,
    QUEUED,
    DocumentJob,
    owner_of,
    safe_name,
)
from hpdparse.serve.settings import MB
from hpdparse.wire import WireError

_EVENT_WAKE = 0.25  # seconds between looks at a document for its event stream


def document_routes(service: Service) -> list[Route]:
    return [
        route(service, "/v1/documents", upload, "POST"),
        route(service, "/v1/documents", listing, "GET"),
        route(service, "/v1/documents/{id}", status, "GET"),
        route(service, "/v1/documents/{id}", delete, "DELETE"),
        route(service, "/v1/documents/{id}/events", events, "GET"),
        route(service, "/v1/documents/{id}/result", result, "GET"),
        route(service, "/v1/documents/{id}/review", review, "GET"),
        route(service, "/v1/convert", convert, "POST"),
        route(service, "/openapi.json", _packaged("openapi.json", "application/json"), "GET"),
        route(service, "/", _packaged("page.html", "text/html"), "GET"),
    ]


# ---------------------------------------------------------------------- accepting documents
async def upload(service: Service, request: Request) -> Response:
    jobs = await _accept(service, request)
    answer = _accepted(jobs)  # as accepted: queued
    for job in jobs:
        service.documents.submit(job)
    return answer


def _accepted(jobs: list[DocumentJob]) -> Response:
    """202 with each document's id, name and status (and the Location of one document)."""
    body = {"documents": [_summary(job) for job in jobs]}
    headers = {"Location": f"/v1/documents/{jobs[0].id}"} if len(jobs) == 1 else None
    return JSONResponse(body, status_code=202, headers=headers)


async def convert(service: Service, request: Request) -> Response:
    """One document, answered when done within --sync-timeout (its Markdown, or the zip with
    format=zip); past that, 202 with its id as POST /v1/documents answers."""
    wanted = request.query_params.get("format", "markdown")
    if wanted not in ("markdown", "zip"):
        raise WireError(400, f"format must be markdown or zip, not {wanted!r}", "format")
    jobs = await _accept(service, request, most=1)
    job = jobs[0]
    service.documents.submit(job)
    deadline = time.monotonic() + service.settings.sync_timeout
    while job.status not in FINAL and time.monotonic() < deadline:
        await asyncio.sleep(_EVENT_WAKE)
    if job.status not in FINAL:
        return _accepted(jobs)
    return await result_response(service.documents.store, job, wanted)


async def _accept(service: Service, request: Request, most: int | None = None) -> list[DocumentJob]:
    check_open(service)  # first: an engine that failed to start is no server starting
    if service.state is State.STARTING:
        raise WireError(503, "the server is starting; retry")
    settings = service.settings
    upload = limited(request, settings.max_upload_mb, "the upload", "--max-upload-mb")
    store = service.documents.store
    incoming = Path(tempfile.mkdtemp(prefix="incoming-", dir=store.root))
    try:
        fields, files, url = await _read_request(upload, incoming)
        try:
            options = read_options(fields)
        except OptionError as exc:
            raise WireError(400, str(exc)) from None
        count = len(files) + (url is not None)
        if count == 0:
            raise WireError(400, 'no document: send files in the form field "file", or a url')
        if most is not None and count > most:
            raise WireError(400, f"this route takes one document, got {count}")
        if url is not None and not settings.allow_urls:
            raise WireError(400, "this server takes no URLs (start it with --allow-urls)", "url")
        if url is not None and not is_url(url):
            raise WireError(400, f"not a URL: {url!r}", "url")
        waiting = store.counts()[QUEUED]
        if waiting + count > settings.max_queued_documents:
            raise WireError(429, f"the queue is full ({waiting} documents waiting); retry later")
        size = sum(path.stat().st_size for _, path in files)
        if settings.max_store_mb is not None:
            limit = int(settings.max_store_mb * MB)
            store.expire(settings.keep_results)
            used = await asyncio.to_thread(store.size)
            if used + size > limit:
                raise WireError(
                    507,
                    f"the store is full ({used / MB:.0f} MB of {limit / MB:.0f}"
                    " MB, --max-store-mb); delete documents or retry later",
                )
        most = settings.max_pages
        for name, path in files:
            over = await asyncio.to_thread(pages_over_limit, name, path, options, most)
            if over is not None:
                raise WireError(413, over)
        owner = _owner(request)
        sources = [(name, safe_name(name), path) for name, path in files]
        jobs = []
        for name, source, path in sources + ([(url, url, None)] if url is not None else []):
            jobs.append(DocumentJob(store.new_id(), name, owner, options, source, time.time()))
            store.accept(jobs[-1], path)
        store.added(size)
        return jobs
    finally:
        shutil.rmtree(incoming, ignore_errors=True)


async def _read_request(
    request: Request, incoming: Path
) -> tuple[dict[str, object], list[tuple[str, Path]], str | None]:
    """The option fields, the uploaded files (spooled into `incoming`) and the URL."""
    if request.headers.get("content-type", "").startswith("application/json"):
        raw = await request.body()
        try:
            data = json.loads(raw or b"null")
        except ValueError as exc:
            raise WireError(400, f"the body is not JSON: {exc}") from None
        if not isinstance(data, dict):
            raise WireError(400, "the body must be a JSON object")
        url = data.pop("url", None)
        if url is not None and not isinstance(url, str):
            raise WireError(400, "url must be a string", "url")
        return data, [], url
    try:
        form = await request.form(max_files=1000, max_fields=100)
    except WireError:
        raise
    except Exception as exc:  # python-multipart's own errors
        raise WireError(400, f"the body is not a form upload: {exc}") from None
    fields: dict[str, object] = {}
    files: list[tuple[str, Path]] = []
    url: str | None = None
    try:
        for key, value in form.multi_items():
            if isinstance(value, UploadFile):
                if key != "file":
                    raise WireError(400, f'files go in the form field "file", not {key!r}')
                files.append((value.filename or "document", _spool(value, incoming, len(files))))
            elif key == "url":
                url = value
            else:
                fields[key] = value
    finally:
        await form.close()
    return fields, files, url


def _spool(upload: UploadFile, incoming: Path, index: int) -> Path:
    """The upload as a file named as the caller named it (made safe), in a folder of its own."""
    path = incoming / str(index) / safe_name(upload.filename)
    path.parent.mkdir()
    upload.file.seek(0)
    with open(path, "wb") as out:
        shutil.copyfileobj(upload.file, out, 1 << 20)
    return path


def _owner(request: Request) -> str:
    return owner_of(bearer_token(request.headers.get("authorization")))


# ---------------------------------------------------------------------- reading documents
def _job(service: Service, request: Request) -> DocumentJob:
    job_id = request.path_params["id"]
    job = service.documents.store.get(job_id, _owner(request))
    if job is None:
        raise WireError(404, f"no document {job_id!r}")
    return job


def _summary(job: DocumentJob) -> dict[str, object]:
    return {"id": job.id, "name": job.name, "status": job.status}


async def status(service: Service, request: Request) -> Response:
    return JSONResponse(_job(service, request).status_body())


async def listing(service: Service, request: Request) -> Response:
    """?limit=N (at most 1000, default 100) &offset=M."""
    try:
        limit = min(int(request.query_params.get("limit", 100)), 1000)
        offset = int(request.query_params.get("offset", 0))
    except ValueError:
        raise WireError(400, "limit and offset must be whole numbers") from None
    if limit < 1 or offset < 0:
        raise WireError(400, "limit must be at least 1 and offset at least 0")
    jobs = service.documents.store.listed(_owner(request))
    page = [job.status_body() for job in jobs[offset : offset + limit]]
    return JSONResponse({"documents": page, "total": len(jobs), "offset": offset, "limit": limit})


async def events(service: Service, request: Request) -> Response:
    """A `status` event (the status body) at each change, then `end` once it has ended."""
    job = _job(service, request)

    async def stream() -> AsyncIterator[str]:
        seen = -1
        while True:
            version, ended = job.version, job.status in FINAL
            if version != seen:
                seen = version
                yield f"event: status\ndata: {json.dumps(job.status_body())}\n\n"
            if ended:
                yield "event: end\ndata: {}\n\n"
                return
            await asyncio.sleep(_EVENT_WAKE)

    headers = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
    return StreamingResponse(stream(), media_type="text/event-stream", headers=headers)


async def result(service: Service, request: Request) -> Response:
    wanted = request.query_params.get("format", "markdown")
    if wanted not in RESULT_FORMATS:
        raise WireError(400, f"format must be one of {', '.join(RESULT_FORMATS)}", "format")
    return await result_response(service.documents.store, _job(service, request), wanted)


async def review(service: Service, request: Request) -> Response:
    job = _job(service, request)
    doc_dir = service.documents.store.document_dir(job)
    if job.status != DONE or doc_dir is None:
        raise WireError(409, f"document {job.id} is {job.status}; it has no review page")

    page_path = await asyncio.to_thread(review_page, doc_dir, job.options.password)
    return FileResponse(page_path, media_type="text/html")


async def delete(service: Service, request: Request) -> Response:
    """A queued or running document is cancelled (202); an ended one deleted with its files."""
    job = _job(service, request)
    if job.status not in FINAL:
        service.documents.cancel(job)
        return JSONResponse(_summary(job), status_code=202)
    service.documents.store.delete(job)
    return JSONResponse({"id": job.id, "deleted": True})


# ---------------------------------------------------------------------- description and page
def _packaged(name: str, media_type: str) -> Callable[..., Awaitable[Response]]:
    """A route answering the file `name` of this package (openapi.json, page.html)."""

    async def answer(service: Service, request: Request) -> Response:
        text = resources.files("hpdparse.serve.documents").joinpath(name).read_text("utf-8")
        return Response(text, media_type=media_type)

    return answer
