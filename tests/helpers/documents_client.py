"""The document routes of a test's `hpdparse serve` as a user's script calls them, with httpx:
upload, poll until a document ends, download a result, read the event stream.

    docs = DocumentsClient(served, key="key-one")
    (doc_id,) = docs.upload_ids([SAMPLES / "memo.pdf"], docling="true")
    body = docs.wait(doc_id)                     # the status body once done/failed/cancelled
    markdown = docs.result(doc_id, "markdown")   # bytes
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable
from pathlib import Path

import httpx

from tests.helpers.patience import PATIENCE_SECONDS
from tests.helpers.serving import Served

FINAL = ("done", "failed", "cancelled")
Upload = Path | tuple[str, bytes]  # a file, or a name and the bytes sent under it


class DocumentsClient:
    def __init__(self, served: Served, key: str | None = None) -> None:
        self.base = served.base
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        self.http = served.client(timeout=120, headers=headers)

    def close(self) -> None:
        self.http.close()

    def upload(self, files: Iterable[Upload], **options: str) -> httpx.Response:
        """POST /v1/documents with the files in the form field "file" and `options` as fields."""
        return self.http.post(f"{self.base}/v1/documents", files=_parts(files), data=options)

    def upload_ids(self, files: Iterable[Upload], **options: str) -> list[str]:
        answer = self.upload(files, **options)
        assert answer.status_code == 202, answer.text
        return [doc["id"] for doc in answer.json()["documents"]]

    def get(self, path: str, **params: object) -> httpx.Response:
        return self.http.get(f"{self.base}{path}", params=params)

    def status(self, doc_id: str) -> dict:
        answer = self.get(f"/v1/documents/{doc_id}")
        assert answer.status_code == 200, answer.text
        return answer.json()

    def wait(self, doc_id: str, until: tuple[str, ...] = FINAL) -> dict:
        """Poll the document until its status is one of `until`; its status body."""
        deadline = time.monotonic() + PATIENCE_SECONDS
        while True:
            body = self.status(doc_id)
            if body["status"] in until:
                return body
            assert time.monotonic() < deadline, f"document {doc_id} stayed {body['status']}"
            time.sleep(0.05)

    def wait_for_pages(self, doc_id: str) -> dict:
        """Poll a running document until some but not all of its pages are done."""
        deadline = time.monotonic() + PATIENCE_SECONDS
        while True:
            body = self.status(doc_id)
            pages = body["pages"]
            if body["status"] == "running" and 0 < pages["done"] < pages["total"]:
                return body
            assert body["status"] not in FINAL, f"document {doc_id} ended first: {body}"
            assert time.monotonic() < deadline, f"document {doc_id}: no page done ({body})"
            time.sleep(0.02)

    def result(self, doc_id: str, wanted: str) -> bytes:
        answer = self.get(f"/v1/documents/{doc_id}/result", format=wanted)
        assert answer.status_code == 200, answer.text
        return answer.content

    def listing(self, **params: object) -> dict:
        answer = self.get("/v1/documents", **params)
        assert answer.status_code == 200, answer.text
        return answer.json()

    def delete(self, doc_id: str) -> httpx.Response:
        return self.http.delete(f"{self.base}/v1/documents/{doc_id}")

    def events(self, doc_id: str) -> list[tuple[str, dict]]:
        """The document's server-sent events, (event, data) each, read until the stream ends."""
        out: list[tuple[str, dict]] = []
        url = f"{self.base}/v1/documents/{doc_id}/events"
        with self.http.stream("GET", url, timeout=PATIENCE_SECONDS) as answer:
            assert answer.status_code == 200, answer.read()
            assert answer.headers["content-type"].startswith("text/event-stream")
            event, data = "message", ""
            for line in answer.iter_lines():
                if line.startswith("event:"):
                    event = line.removeprefix("event:").strip()
                elif line.startswith("data:"):
                    data += line.removeprefix("data:").strip()
                elif not line and data:
                    out.append((event, json.loads(data)))
                    event, data = "message", ""
        return out


def _parts(files: Iterable[Upload]) -> list[tuple[str, tuple[str, bytes]]]:
    parts = []
    for item in files:
        name, content = (item.name, item.read_bytes()) if isinstance(item, Path) else item
        parts.append(("file", (name, content)))
    return parts
