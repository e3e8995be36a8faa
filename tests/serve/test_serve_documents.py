"""The document routes of `hpdparse serve` as a user's script sees them: a real server (torch
engine, tiny checkpoint) and httpx. A document's files are `hpdparse convert`'s for the same input
and options, byte for byte but for where and when the input was read and the page timings
(tests/helpers/convert_outputs.py); its status, progress events, the listing, deletion,
cancellation and the synchronous POST /v1/convert.
"""

from __future__ import annotations

import base64
import io
import zipfile
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("starlette")
pytest.importorskip("docling_core")

from tests.helpers.convert_outputs import SERVICE_OPTIONS, comparable_files, folder_files
from tests.helpers.documents_client import DocumentsClient
from tests.helpers.paths import SAMPLES
from tests.helpers.pdfs import make_pdf
from tests.helpers.serving import Served, serve_process

SERVER = ["--engine", "torch", "--device", "cpu", "--port", "0"]
SAMPLE_FILES = ("report.pdf", "paper.pdf", "memo.pdf", "scan.png")


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    stderr = tmp_path_factory.mktemp("serve-documents") / "stderr.txt"
    with serve_process(SERVER, stderr) as served:
        yield served


@pytest.fixture(scope="module")
def docs(served: Served) -> Iterator[DocumentsClient]:
    client = DocumentsClient(served)
    yield client
    client.close()


def _store(served: Served) -> Path:
    return served.stderr.parent / "store" / "documents"


def test_results_are_converts_files(docs: DocumentsClient, served: Served, converted) -> None:
    answer = docs.upload([SAMPLES / name for name in SAMPLE_FILES], **SERVICE_OPTIONS)
    assert answer.status_code == 202, answer.text
    accepted = answer.json()["documents"]
    assert [(doc["name"], doc["status"]) for doc in accepted] == [
        (name, "queued") for name in SAMPLE_FILES
    ]
    assert "location" not in answer.headers  # several documents: no one place
    for doc, name in zip(accepted, SAMPLE_FILES, strict=True):
        body = docs.wait(doc["id"])
        assert body["status"] == "done", body
        stem = Path(name).stem
        expected = comparable_files(folder_files(converted / stem), stem)
        assert body["pages"]["done"] == body["pages"]["total"] == body["report"]["pages"] > 0

        got = {
            f"{stem}.md": docs.result(doc["id"], "markdown"),
            f"{stem}.json": docs.result(doc["id"], "json"),
            f"{stem}.docling.json": docs.result(doc["id"], "docling"),
            f"{stem}.chunks.jsonl": docs.result(doc["id"], "chunks"),
        }
        assert comparable_files(got, stem) == {rel: expected[rel] for rel in got}, name

        with zipfile.ZipFile(io.BytesIO(docs.result(doc["id"], "zip"))) as archive:
            zipped = {info.filename: archive.read(info) for info in archive.infolist()}
        assert sorted(zipped) == sorted(f"{stem}/{rel}" for rel in expected), name
        in_folder = {name.removeprefix(f"{stem}/"): data for name, data in zipped.items()}
        assert comparable_files(in_folder, stem) == expected, name

        # what was blanked is where the service read the upload: its document's folder
        upload = _store(served) / doc["id"] / "input" / name
        assert upload.read_bytes() == (SAMPLES / name).read_bytes()
        assert f'"source": "{upload}"'.encode() in got[f"{stem}.json"]


def test_one_document_answers_its_location(docs: DocumentsClient, converted) -> None:
    answer = docs.upload([SAMPLES / "memo.pdf"], **SERVICE_OPTIONS)
    assert answer.status_code == 202, answer.text
    (doc,) = answer.json()["documents"]
    assert answer.headers["location"] == f"/v1/documents/{doc['id']}"
    assert doc["status"] == "queued"
    assert docs.wait(doc["id"])["status"] == "done"
    assert docs.get(answer.headers["location"]).json()["id"] == doc["id"]
    assert docs.result(doc["id"], "markdown") == (converted / "memo" / "memo.md").read_bytes()


def test_html_embeds_the_figures_of_convert_s_folder(docs: DocumentsClient, converted) -> None:
    """format=html (the web page's view): the Markdown rendered, each figure line its crop."""
    (doc_id,) = docs.upload_ids([SAMPLES / "report.pdf"], **SERVICE_OPTIONS)
    assert docs.wait(doc_id)["status"] == "done"
    page = docs.result(doc_id, "html").decode("utf-8")
    crop = (converted / "report" / "images" / "page-0003-figure-01.png").read_bytes()
    assert "![](images/page-0003-figure-01.png)" in (converted / "report" / "report.md").read_text()
    assert page.count("<img ") == 1
    assert f'src="data:image/png;base64,{base64.b64encode(crop).decode()}"' in page
    assert "images/page-0003-figure-01.png" not in page
    assert "<h1>Annual Report on Data Quality</h1>" in page
    assert "<table>" in page and "<math" in page


def test_events_follow_a_document_to_its_end(docs: DocumentsClient, long_pdf: Path) -> None:
    (doc_id,) = docs.upload_ids([long_pdf])
    events = docs.events(doc_id)
    names = [name for name, _ in events]
    assert names[-1] == "end" and names.count("end") == 1 and set(names[:-1]) == {"status"}
    bodies = [data for _, data in events[:-1]]
    statuses = [body["status"] for body in bodies]
    order = ["queued", "running", "done"]
    assert statuses == sorted(statuses, key=order.index), statuses
    assert "running" in statuses and statuses[-1] == "done", statuses
    done = [body["pages"]["done"] for body in bodies]
    assert done == sorted(done), done
    assert bodies[-1]["pages"] == {"total": 24, "done": 24, "failed": 0}
    assert all(body["pages"]["total"] in (0, 24) for body in bodies)
    assert docs.status(doc_id) == bodies[-1]


def test_listing_is_newest_first_with_limit_and_offset(docs: DocumentsClient) -> None:
    memo = (SAMPLES / "memo.pdf").read_bytes()
    ids = [docs.upload_ids([(f"list-{n}.pdf", memo)])[0] for n in range(3)]
    everything = docs.listing(limit=1000)
    listed = [body["id"] for body in everything["documents"]]
    assert listed[:3] == ids[::-1]
    assert everything["total"] == len(listed) >= 3
    created = [body["created"] for body in everything["documents"]]
    assert created == sorted(created, reverse=True)
    for offset in range(len(listed) + 1):
        page = docs.listing(limit=2, offset=offset)
        assert [body["id"] for body in page["documents"]] == listed[offset : offset + 2]
        assert (page["total"], page["offset"], page["limit"]) == (len(listed), offset, 2)
    for bad in ({"limit": 0}, {"offset": -1}, {"limit": "many"}):
        assert docs.get("/v1/documents", **bad).status_code == 400, bad
    for doc_id in ids:
        docs.wait(doc_id)


def test_metrics_count_the_documents_by_status(docs: DocumentsClient) -> None:
    (doc_id,) = docs.upload_ids([SAMPLES / "memo.pdf"])
    listed = docs.listing(limit=1000)["documents"]
    for body in listed:
        docs.wait(body["id"])
    statuses = Counter(docs.status(body["id"])["status"] for body in listed)
    assert statuses["done"] >= 1
    metrics = docs.get("/metrics").text
    for status in ("queued", "running", "done", "failed", "cancelled"):
        assert f'hpdparse_documents{{status="{status}"}} {float(statuses[status])}' in metrics


def test_deleting_a_done_document_removes_its_files(docs: DocumentsClient, served) -> None:
    (doc_id,) = docs.upload_ids([SAMPLES / "memo.pdf"])
    assert docs.wait(doc_id)["status"] == "done"
    docs.result(doc_id, "zip")  # the zip is made in the document's folder too
    folder = _store(served) / doc_id
    assert (folder / "result.zip").is_file() and (folder / "out" / "memo" / "memo.md").is_file()

    answer = docs.delete(doc_id)
    assert answer.status_code == 200, answer.text
    assert answer.json() == {"id": doc_id, "deleted": True}
    assert not folder.exists()
    for path in ("", "/result", "/events"):
        gone = docs.get(f"/v1/documents/{doc_id}{path}")
        assert gone.status_code == 404, (path, gone.text)
        assert doc_id in gone.json()["error"]["message"]
    assert docs.delete(doc_id).status_code == 404
    assert doc_id not in [body["id"] for body in docs.listing(limit=1000)["documents"]]


def test_cancelling_a_running_document(docs: DocumentsClient, tmp_path: Path) -> None:
    (doc_id,) = docs.upload_ids([make_pdf(tmp_path / "long.pdf", pages=60)])
    docs.wait(doc_id, until=("running", "done", "failed"))
    answer = docs.delete(doc_id)
    assert answer.status_code == 202, answer.text
    assert answer.json()["id"] == doc_id
    body = docs.wait(doc_id)
    assert body["status"] == "cancelled", body
    assert body["pages"]["done"] < 60
    refused = docs.get(f"/v1/documents/{doc_id}/result")
    assert refused.status_code == 409 and "cancelled" in refused.json()["error"]["message"]


def test_convert_answers_the_markdown(docs: DocumentsClient, converted) -> None:
    url = f"{docs.base}/v1/convert"
    with open(SAMPLES / "memo.pdf", "rb") as memo:
        answer = docs.http.post(url, files={"file": memo}, data=SERVICE_OPTIONS)
    assert answer.status_code == 200, answer.text
    assert answer.headers["content-type"].startswith("text/markdown")
    assert answer.content == (converted / "memo" / "memo.md").read_bytes()

    with open(SAMPLES / "scan.png", "rb") as scan:
        answer = docs.http.post(url, files={"file": scan}, params={"format": "zip"})
    assert answer.status_code == 200, answer.text
    with zipfile.ZipFile(io.BytesIO(answer.content)) as archive:
        scan_md = archive.read("scan/scan.md")
    assert scan_md == (converted / "scan" / "scan.md").read_bytes()
