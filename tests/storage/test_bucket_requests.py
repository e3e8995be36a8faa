"""What a bucket run asks of the store, counted at the server (moto's access log): the objects a
document and its pages are written to, each once and the .md last, and a source at a URL read
once while planning."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from hpdparse.runner.plan import plan_document
from hpdparse.runner.settings import ConvertSettings
from hpdparse.sources.location import UrlSource
from hpdparse.store.output_store import open_document_folder
from tests.helpers.fakeserver import FakeHPDServer
from tests.helpers.pdfs import make_pdf
from tests.helpers.scripted_engine import SCRIPTED_INFO as INFO
from tests.storage.conftest import S3, upload
from tests.storage.runs import hpdparse

PAGES = 4


def test_each_object_is_put_once_and_the_markdown_last(bucket: str, s3: S3, tmp_path: Path) -> None:
    pdf = make_pdf(tmp_path / "doc.pdf", PAGES, "puts")
    since = s3.server.log_offset()
    with FakeHPDServer() as fake:  # every answer has a figure: each page has one crop
        proc = hpdparse(
            "convert", str(pdf), "-o", f"s3://{bucket}/out",
            "--engine", "openai", "--server", fake.url, "--dpi", "60", "--quiet",
        )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    log = s3.server.request_log(since, bucket)
    puts = [key for kind, key in log if kind == "PUT"]
    doc = f"/{bucket}/out/doc/"
    per_page = [
        f"{doc}raw/page-{n:04d}.{ext}" for n in range(1, PAGES + 1) for ext in ("txt", "json")
    ] + [f"{doc}images/page-{n:04d}-figure-01.png" for n in range(1, PAGES + 1)]
    per_document = [f"{doc}raw/document.json"] * 2 + [f"{doc}doc.json", f"{doc}doc.md"]
    # 3 PUTs a page (2 raw objects and its one figure), 4 a document (the resume state when the
    # folder is claimed and when it is finished, .json, .md): nothing written twice.
    assert Counter(puts) == Counter(per_page + per_document)
    assert puts[-1] == f"{doc}doc.md"  # written last, after every other object was written
    # Finishing takes the raw pages this run wrote from memory: none is read back.
    assert [key for kind, key in log if kind == "GET" and "/raw/page-" in key] == []


def _source_requests(s3: S3, since: int, key: str) -> Counter[str]:
    return Counter(kind for kind, path in s3.server.request_log(since) if path == key)


@pytest.mark.parametrize("rerun", [False, True])
def test_planning_reads_a_source_at_a_url_once(
    bucket: str, s3: S3, tmp_path: Path, rerun: bool
) -> None:
    upload(bucket, "in/", [make_pdf(tmp_path / "doc.pdf", PAGES, "planned")])
    source = UrlSource(f"s3://{bucket}/in/doc.pdf")
    folder = open_document_folder(f"s3://{bucket}/out/doc")
    settings = ConvertSettings(output_dir=f"s3://{bucket}/out", dpi=60)
    if rerun:  # a folder claimed earlier: its resume state names the source
        plan_document(folder, source, settings, INFO)
    since = s3.server.log_offset()
    plan = plan_document(folder, source, settings, INFO)
    assert plan.to_decode == list(range(1, PAGES + 1))
    # One HEAD (exists? size, date) and one GET (its sha256, then its pages counted).
    assert _source_requests(s3, since, f"/{bucket}/in/doc.pdf") == {"HEAD": 1, "GET": 1}
