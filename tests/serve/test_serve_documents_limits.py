"""`hpdparse serve`'s document routes under bad input and load (a real server: torch engine,
tiny checkpoint, small limits): broken, empty, encrypted and unsupported uploads end `failed`
with `hpdparse convert`'s one-line error and the server keeps serving; the upload size and page
limits answer 413, a full queue 429 with Retry-After, a wrong field or value 400; an upload's
file name never becomes a path.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("starlette")

from tests.helpers.convert_outputs import convert_errors, run_convert
from tests.helpers.documents_client import DocumentsClient
from tests.helpers.paths import REPO, SAMPLES
from tests.helpers.pdfs import make_pdf
from tests.helpers.serving import Served, serve_process

MAX_PAGES, MAX_QUEUED = 10, 4
SERVER = ["--engine", "torch", "--device", "cpu", "--port", "0", "--max-upload-mb", "1"]
SERVER += ["--max-pages", str(MAX_PAGES), "--max-queued-documents", str(MAX_QUEUED)]
# one document at a time, one page at a time: a 10-page document runs long enough to queue others
SERVER += ["--running-documents", "1", "--batch-size", "1"]


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    stderr = tmp_path_factory.mktemp("serve-documents-limits") / "stderr.txt"
    # named relative to the server's working folder, as `--store store` is
    store = os.path.relpath(stderr.parent / "store", REPO)
    with serve_process([*SERVER, "--store", store], stderr) as served:
        yield served


@pytest.fixture(scope="module")
def docs(served: Served) -> Iterator[DocumentsClient]:
    client = DocumentsClient(served)
    yield client
    client.close()


def _store(served: Served) -> Path:
    return served.stderr.parent / "store"


def _error(answer, status: int) -> str:
    assert answer.status_code == status, answer.text
    return answer.json()["error"]["message"]


def test_bad_uploads_fail_with_converts_error(
    docs: DocumentsClient, served: Served, tmp_path: Path, converted: Path
) -> None:
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "broken.pdf").write_bytes(b"this is no PDF, only text\n" * 20)
    (bad / "empty.pdf").write_bytes(b"")
    (bad / "notes.xyz").write_bytes(b"plain text in a format nothing reads")
    make_pdf(bad / "locked.pdf", pages=2, password="sesame")
    files = sorted(bad.iterdir())
    convert = run_convert(files, tmp_path / "out", "--quiet")
    assert convert.returncode == 1, convert.stderr
    expected = convert_errors(convert.stderr)
    assert sorted(expected) == [path.name for path in files], convert.stderr
    assert "password" in expected["locked.pdf"]

    ids = docs.upload_ids(files)
    for doc_id, path in zip(ids, files, strict=True):
        body = docs.wait(doc_id)
        assert body["status"] == "failed", body
        assert body["error"] == f"{path.name}: {expected[path.name]}"
        assert "\n" not in body["error"]
        refused = docs.get(f"/v1/documents/{doc_id}/result")
        assert body["error"] in _error(refused, 409)

    (doc_id,) = docs.upload_ids([bad / "locked.pdf"], password="sesame")
    body = docs.wait(doc_id)
    assert body["status"] == "done", body
    assert body["pages"] == {"total": 2, "done": 2, "failed": 0}
    assert "sesame" not in (_store(served) / "documents" / doc_id / "job.json").read_text()

    # the server goes on serving
    assert docs.get("/health").status_code == 200
    with open(SAMPLES / "memo.pdf", "rb") as memo:
        answer = docs.http.post(f"{docs.base}/v1/convert", files={"file": memo})
    assert answer.status_code == 200, answer.text
    assert answer.content == (converted / "memo" / "memo.md").read_bytes()


def test_an_upload_over_the_size_limit_gets_413(docs: DocumentsClient, served: Served) -> None:
    before = sorted((_store(served) / "documents").iterdir())
    big = ("big.pdf", b"%PDF-1.7\n" + b"0" * (3 * 2**19))  # 1.5 MB
    message = _error(docs.upload([big]), 413)
    assert message == "the upload is 1.5 MB; this server takes at most 1 MB (--max-upload-mb)"

    # a body without a length is cut off where it passes the limit
    request = docs.http.build_request("POST", f"{docs.base}/v1/documents", files=[("file", big)])
    body = request.read()
    chunks = (body[at : at + 2**16] for at in range(0, len(body), 2**16))
    headers = {"content-type": request.headers["content-type"]}
    answer = docs.http.post(f"{docs.base}/v1/documents", content=chunks, headers=headers)
    assert "this server takes at most 1 MB (--max-upload-mb)" in _error(answer, 413)

    assert sorted((_store(served) / "documents").iterdir()) == before
    assert not list(_store(served).glob("incoming-*"))
    assert docs.get("/health").status_code == 200


def test_a_document_over_max_pages_gets_413(docs: DocumentsClient, tmp_path: Path) -> None:
    pdf = make_pdf(tmp_path / "eleven.pdf", pages=MAX_PAGES + 1)
    message = _error(docs.upload([pdf]), 413)
    assert message == "eleven.pdf: 11 pages to convert; this server takes at most 10 (--max-pages)"
    (doc_id,) = docs.upload_ids([pdf], pages="2-3")  # the pages selected are what counts
    body = docs.wait(doc_id)
    assert body["status"] == "done", body
    assert body["pages"] == {"total": 2, "done": 2, "failed": 0}


def test_file_names_never_become_paths(
    docs: DocumentsClient, served: Served, converted: Path
) -> None:
    sent = [
        ("../../evil.pdf", "memo", "evil.pdf"),
        ("..\\x.pdf", "report", "x.pdf"),
        ("same.pdf", "memo", "same.pdf"),
        ("same.pdf", "paper", "same.pdf"),
    ]
    uploads = [(name, (SAMPLES / f"{sample}.pdf").read_bytes()) for name, sample, _ in sent]
    answer = docs.upload(uploads[:3])
    assert answer.status_code == 202, answer.text
    accepted = answer.json()["documents"] + [docs.upload(uploads[3:]).json()["documents"][0]]
    assert [doc["name"] for doc in accepted] == [name for name, _, _ in sent]

    store = _store(served)
    for doc, (_, sample, kept) in zip(accepted, sent, strict=True):
        inputs = store / "documents" / doc["id"] / "input"
        assert [path.name for path in inputs.iterdir()] == [kept]
        assert (inputs / kept).read_bytes() == (SAMPLES / f"{sample}.pdf").read_bytes()
    for name in ("evil.pdf", "x.pdf"):
        outside = [store.parent / name, store.parent.parent / name, store / name]
        assert not any(path.exists() for path in outside)
        inside = {path.relative_to(store).parts[:3] for path in store.rglob(name)}
        assert all(parts[0] == "documents" and parts[2] == "input" for parts in inside), inside

    for doc, (_, sample, _) in zip(accepted, sent, strict=True):
        assert docs.wait(doc["id"])["status"] == "done"
        markdown = docs.result(doc["id"], "markdown")
        assert markdown == (converted / sample / f"{sample}.md").read_bytes(), doc


def test_a_full_queue_gets_429_with_retry_after(docs: DocumentsClient, tmp_path: Path) -> None:
    (running,) = docs.upload_ids([make_pdf(tmp_path / "slow.pdf", pages=MAX_PAGES)])
    docs.wait(running, until=("running", "done", "failed"))
    waiting = docs.upload_ids([SAMPLES / "memo.pdf"] * MAX_QUEUED)
    answer = docs.upload([SAMPLES / "memo.pdf"])
    message = _error(answer, 429)
    assert answer.headers["retry-after"].isdigit() and int(answer.headers["retry-after"]) > 0
    assert message == f"the queue is full ({MAX_QUEUED} documents waiting); retry later"
    # the queue was full, not a document failed: the first still runs, the others wait
    assert docs.status(running)["status"] == "running"
    assert [docs.status(doc_id)["status"] for doc_id in waiting] == ["queued"] * MAX_QUEUED

    for doc_id in [running, *waiting]:
        assert docs.delete(doc_id).status_code == 202
    for doc_id in [running, *waiting]:
        assert docs.wait(doc_id)["status"] == "cancelled"
    (doc_id,) = docs.upload_ids([SAMPLES / "memo.pdf"])  # room again
    assert docs.wait(doc_id)["status"] == "done"


@pytest.mark.parametrize(
    ("fields", "wanted"),
    [
        ({"bogus": "1"}, "unknown option 'bogus'; the options are: pages, password"),
        ({"docling": "maybe"}, "docling: expected true or false, got 'maybe'"),
        ({"table_format": "xml"}, "table_format: expected one of auto, gfm, html, got 'xml'"),
        ({"chunk_tokens": "many"}, "chunk_tokens: expected a number, got 'many'"),
        ({"pages": "three"}, "pages: "),
    ],
)
def test_a_wrong_option_gets_400(
    docs: DocumentsClient, served: Served, fields: dict, wanted: str
) -> None:
    before = sorted((_store(served) / "documents").iterdir())
    assert wanted in _error(docs.upload([SAMPLES / "memo.pdf"], **fields), 400)
    assert sorted((_store(served) / "documents").iterdir()) == before


def test_a_url_or_a_misshapen_request_gets_400(docs: DocumentsClient) -> None:
    url = f"{docs.base}/v1/documents"
    answer = docs.http.post(url, json={"url": "https://example.com/paper.pdf"})
    assert _error(answer, 400) == "this server takes no URLs (start it with --allow-urls)"
    answer = docs.http.post(url, data={"url": "https://example.com/paper.pdf"})
    assert "--allow-urls" in _error(answer, 400)
    assert "no document" in _error(docs.http.post(url, data={"docling": "true"}), 400)
    answer = docs.http.post(url, files={"upload": ("a.pdf", b"%PDF-")})
    assert 'form field "file"' in _error(answer, 400)
    answer = docs.http.post(url, content=b"[1, 2]", headers={"content-type": "application/json"})
    assert _error(answer, 400) == "the body must be a JSON object"
    answer = docs.http.post(f"{docs.base}/v1/convert", files=[("file", ("a.pdf", b"1"))] * 2)
    assert _error(answer, 400) == "this route takes one document, got 2"
    # a form's url counts with the files sent after it (they were dropped once)
    form = {"url": "https://example.com/paper.pdf"}
    answer = docs.http.post(f"{docs.base}/v1/convert", data=form, files={"file": ("a.pdf", b"1")})
    assert _error(answer, 400) == "this route takes one document, got 2"
