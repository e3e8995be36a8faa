"""What a bucket run asks of the store, counted at the server (moto's access log): the objects a
document and its pages are written to, each once and the .md last, and a source at a URL read
once while planning; and the rasterizers that read it start with its file system imported."""

from __future__ import annotations

import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from hpdparse.runner.plan import plan_document
from hpdparse.runner.settings import ConvertSettings
from hpdparse.sources.location import UrlSource
from hpdparse.store.output_store import open_document_folder
from tests.helpers.fakeserver import FakeHPDServer
from tests.helpers.paths import REPO
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


# In a new interpreter: the forkserver starts with the process's first pool (pytest's started
# long before this test).
_FIRST_POOL = """
import sys
from hpdparse.runner.workers import WorkerPool
from hpdparse.sources.location import UrlSource
from tests.helpers.processes import loaded_modules

if __name__ == "__main__":
    if sys.argv[1] != "-":
        UrlSource(sys.argv[1]).is_file()  # as planning reads an input at a URL
    pool = WorkerPool(1, str)
    print(" ".join(pool.submit(loaded_modules, ["s3fs.core", "aiobotocore"]).result()) or "-")
"""


@pytest.mark.parametrize("url_input", [True, False], ids=["url-input", "local-input"])
def test_rasterizers_start_with_the_input_file_system_imported(
    bucket: str, s3: S3, tmp_path: Path, url_input: bool
) -> None:
    """Each rasterizer reads the run's inputs at URLs itself; the file system's library (s3fs,
    aiobotocore: ~0.4 s of CPU to import) is imported once, by the forkserver the workers fork
    from, not once by every worker; and not at all for a run of local inputs."""
    pdf = make_pdf(tmp_path / "doc.pdf", 1, "preload")
    upload(bucket, "", [pdf])
    script = tmp_path / "first_pool.py"
    script.write_text(_FIRST_POOL)
    url = f"s3://{bucket}/doc.pdf" if url_input else "-"
    proc = subprocess.run(
        [sys.executable, str(script), url],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=300,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    expected = "s3fs.core aiobotocore" if url_input else "-"
    assert proc.stdout.split("\n")[-2] == expected, proc.stdout
