"""Many callers of one `hpdparse serve` (torch engine, tiny checkpoint) with two API keys:
8 clients, each on a thread of its own with several documents, all get convert's Markdown; each
key sees only the documents it uploaded; a call without a key (or with a wrong one) gets 401.
"""

from __future__ import annotations

import concurrent.futures
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("starlette")

from tests.helpers.documents_client import DocumentsClient
from tests.helpers.paths import SAMPLES
from tests.helpers.serving import Served, serve_process

KEYS = ("key-one", "key-two")
SERVER = ["--engine", "torch", "--device", "cpu", "--port", "0"]
SERVER += ["--api-key", KEYS[0], "--api-key", KEYS[1]]
SAMPLE_FILES = ("report.pdf", "paper.pdf", "memo.pdf", "scan.png")
CLIENTS, DOCUMENTS_EACH = 8, 3


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    stderr = tmp_path_factory.mktemp("serve-documents-clients") / "stderr.txt"
    with serve_process(SERVER, stderr) as served:
        yield served


@pytest.fixture(scope="module")
def uploaded() -> dict[str, list[str]]:
    """The ids each key uploaded in this module's tests (what its listing must hold)."""
    return {key: [] for key in KEYS}


def _client_run(served: Served, index: int) -> tuple[str, list[tuple[str, str, bytes]]]:
    """One client: uploads its documents one request each, then waits for and downloads each
    one's Markdown; (its key, [(id, sample, markdown)])."""
    key = KEYS[index % 2]
    docs = DocumentsClient(served, key)
    try:
        names = [SAMPLE_FILES[(index + k) % len(SAMPLE_FILES)] for k in range(DOCUMENTS_EACH)]
        ids = [docs.upload_ids([SAMPLES / name])[0] for name in names]
        results = []
        for doc_id, name in zip(ids, names, strict=True):
            body = docs.wait(doc_id)
            assert body["status"] == "done", body
            results.append((doc_id, name, docs.result(doc_id, "markdown")))
        return key, results
    finally:
        docs.close()


def test_eight_clients_get_converts_markdown(served: Served, converted: Path, uploaded) -> None:
    with concurrent.futures.ThreadPoolExecutor(CLIENTS) as pool:
        runs = list(pool.map(lambda index: _client_run(served, index), range(CLIENTS)))
    seen = set()
    for key, results in runs:
        assert len(results) == DOCUMENTS_EACH
        for doc_id, name, markdown in results:
            stem = Path(name).stem
            assert markdown == (converted / stem / f"{stem}.md").read_bytes(), (key, name)
            seen.add(doc_id)
            uploaded[key].append(doc_id)
    assert len(seen) == CLIENTS * DOCUMENTS_EACH


def test_each_key_sees_only_its_own_documents(served: Served, uploaded) -> None:
    one, two = (DocumentsClient(served, key) for key in KEYS)
    try:
        for docs, key in ((one, KEYS[0]), (two, KEYS[1])):
            (doc_id,) = docs.upload_ids([SAMPLES / "memo.pdf"])
            uploaded[key].append(doc_id)
            assert docs.wait(doc_id)["status"] == "done"
        for docs, key, other in ((one, KEYS[0], KEYS[1]), (two, KEYS[1], KEYS[0])):
            listing = docs.listing(limit=1000)
            assert {body["id"] for body in listing["documents"]} == set(uploaded[key])
            assert listing["total"] == len(uploaded[key])
            for doc_id in uploaded[other]:
                for path in ("", "/events", "/result"):
                    answer = docs.get(f"/v1/documents/{doc_id}{path}")
                    assert answer.status_code == 404, (path, answer.text)
                assert docs.delete(doc_id).status_code == 404
        # the other key's DELETE removed nothing
        assert all(one.status(doc_id)["status"] == "done" for doc_id in uploaded[KEYS[0]])
        assert all(two.status(doc_id)["status"] == "done" for doc_id in uploaded[KEYS[1]])
    finally:
        one.close()
        two.close()


@pytest.mark.parametrize("key", [None, "not-a-key"])
def test_a_caller_without_a_key_gets_401(served: Served, uploaded, key: str | None) -> None:
    docs = DocumentsClient(served, key)
    some_id = (uploaded[KEYS[0]] or ["0" * 24])[0]
    try:
        answers = [
            docs.get("/v1/documents"),
            docs.get(f"/v1/documents/{some_id}"),
            docs.get(f"/v1/documents/{some_id}/result"),
            docs.get(f"/v1/documents/{some_id}/events"),
            docs.delete(some_id),
            docs.upload([SAMPLES / "memo.pdf"]),
            docs.http.post(f"{docs.base}/v1/convert", files={"file": ("a.pdf", b"%PDF-")}),
        ]
        for answer in answers:
            assert answer.status_code == 401, (answer.request.url, answer.text)
        assert docs.get("/health").status_code == 200
        assert docs.get("/openapi.json").status_code == 200  # open: clients are made from it
        assert docs.get("/").status_code == 200  # the web page asks for the key itself
    finally:
        docs.close()
    if some_id in uploaded[KEYS[0]]:  # the refused DELETE removed nothing
        owner = DocumentsClient(served, KEYS[0])
        try:
            assert owner.status(some_id)["status"] == "done"
        finally:
            owner.close()
