"""`hpdparse convert` with inputs and outputs in a bucket of a real S3 server (moto, on
127.0.0.1): the output is the one a local run writes, reruns skip, --overwrite deletes the
document's old objects, the report can go to a URL, and the secret key never reaches a file,
a message or the report."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.helpers.fakeserver import FakeHPDServer
from tests.helpers.paths import SAMPLES, TINY
from tests.storage.conftest import SECRET, download_tree, upload
from tests.storage.runs import assert_same_output, hpdparse, tree_files

SAMPLE_FILES = sorted(p for p in SAMPLES.iterdir() if p.is_file())


@pytest.fixture(scope="module")
def fake() -> FakeHPDServer:
    with FakeHPDServer() as server:
        yield server


def _report(path: Path) -> dict:
    return json.loads(path.read_text())


@pytest.mark.torch
def test_samples_bucket_to_bucket_match_a_local_run(bucket: str, tmp_path: Path) -> None:
    pytest.importorskip("torch")
    engine = ["--engine", "torch", "--model", str(TINY), "--quiet"]
    local = hpdparse("convert", *map(str, SAMPLE_FILES), "-o", str(tmp_path / "local"), *engine)
    assert local.returncode == 0, local.stderr
    upload(bucket, "in/", SAMPLE_FILES)
    remote = hpdparse("convert", f"s3://{bucket}/in/", "-o", f"s3://{bucket}/out/", *engine)
    assert remote.returncode == 0, remote.stderr
    assert "Traceback" not in remote.stderr
    download_tree(bucket, "out/", tmp_path / "copy")
    assert_same_output(tmp_path / "local", tmp_path / "copy")


CORPUS_FILES = [
    "plumber__scotus-transcript-p1.pdf",
    "pymupdf__test_4034.pdf",
    "pdfjs__issue18030.pdf",  # a 48 x 71 pt page
    "pdfjs__poppler-742-0-fuzzed.pdf",  # damaged beyond repair
    "qpdf__bookmarks-3-not-pdf.pdf",
    "plumber__empty.pdf",  # 0 bytes
]


def test_corpus_files_bucket_to_bucket_match_a_local_run(
    bucket: str, fake: FakeHPDServer, corpus_dir: Path, tmp_path: Path
) -> None:
    files = [corpus_dir / name for name in CORPUS_FILES]
    engine = ["--engine", "openai", "--server", fake.url, "--dpi", "60", "--quiet"]
    local_report, bucket_report = tmp_path / "local.json", tmp_path / "bucket.json"
    local = hpdparse(
        "convert",
        *map(str, files),
        "-o",
        str(tmp_path / "local"),
        *engine,
        "--report",
        str(local_report),
    )
    upload(bucket, "in/", files)
    remote = hpdparse(
        "convert",
        f"s3://{bucket}/in/",
        "-o",
        f"s3://{bucket}/out/",
        *engine,
        "--report",
        str(bucket_report),
    )
    assert local.returncode == remote.returncode == 1  # the three broken files
    assert "Traceback" not in remote.stderr
    download_tree(bucket, "out/", tmp_path / "copy")
    assert_same_output(tmp_path / "local", tmp_path / "copy")

    def outcomes(report: Path, prefix: str) -> dict[str, tuple[str, str | None]]:
        return {
            Path(d["source"]).name: (d["status"], (d["error"] or "").replace(prefix, "SRC/"))
            for d in _report(report)["documents"]
        }

    expected = outcomes(local_report, f"{corpus_dir.resolve()}/")
    assert outcomes(bucket_report, f"s3://{bucket}/in/") == expected
    assert [expected[name][0] for name in CORPUS_FILES] == ["converted"] * 3 + ["failed"] * 3


def test_rerun_skips_and_overwrite_deletes_the_old_objects(
    bucket: str, fake: FakeHPDServer, tmp_path: Path
) -> None:
    upload(bucket, "in/", SAMPLE_FILES)
    out = f"s3://{bucket}/out"
    engine = ["--engine", "openai", "--server", fake.url, "--dpi", "60", "--quiet"]
    report = tmp_path / "report.json"
    first = hpdparse("convert", f"s3://{bucket}/in/*.pdf", "-o", out, *engine)
    assert first.returncode == 0, first.stderr
    download_tree(bucket, "out/", tmp_path / "first")
    fake.clear_log()
    again = hpdparse(
        "convert", f"s3://{bucket}/in/*.pdf", "-o", out, *engine, "--report", str(report)
    )
    assert again.returncode == 0, again.stderr
    assert {d["status"] for d in _report(report)["documents"]} == {"skipped"}
    assert fake.chat_count == 0
    # Objects an earlier run left (a review page, an image of a page that no longer has one).
    stale = tmp_path / "stale"
    stale.mkdir()
    (stale / "report.review.html").write_text("old")
    upload(bucket, "out/report/", [stale / "report.review.html"])
    upload(bucket, "out/report/images/", [_png(stale / "page-0009-figure-01.png")])
    fake.clear_log()
    redo = hpdparse("convert", f"s3://{bucket}/in/*.pdf", "-o", out, *engine, "--overwrite")
    assert redo.returncode == 0, redo.stderr
    assert fake.chat_count == 6  # every page of the three PDFs decoded again
    download_tree(bucket, "out/", tmp_path / "redo")
    assert_same_output(tmp_path / "first", tmp_path / "redo")


def _png(path: Path) -> Path:
    shutil.copy(SAMPLES / "scan.png", path)
    return path


def test_report_to_a_url_and_the_secret_is_nowhere(
    bucket: str, fake: FakeHPDServer, tmp_path: Path
) -> None:
    upload(bucket, "in/", SAMPLE_FILES)
    engine = ["--engine", "openai", "--server", fake.url, "--dpi", "60"]
    secret_options = ["--storage-option", f"secret={SECRET}", "--storage-option", "key=k-1"]
    proc = hpdparse(
        "convert",
        f"s3://{bucket}/in/",
        f"s3://{bucket}/in/missing.pdf",
        "-o",
        f"s3://{bucket}/out/",
        *engine,
        *secret_options,
        "--report",
        f"s3://{bucket}/runs/report.json",
        "-v",
    )
    assert proc.returncode == 1, proc.stderr  # the missing input
    download_tree(bucket, "", tmp_path / "all")
    report = _report(tmp_path / "all" / "runs" / "report.json")
    statuses = {Path(d["source"]).name: d["status"] for d in report["documents"]}
    assert statuses == {
        "missing.pdf": "failed",
        "memo.pdf": "converted",
        "paper.pdf": "converted",
        "report.pdf": "converted",
        "scan.png": "converted",
    }
    assert report["output_dir"].rstrip("/") == f"s3://{bucket}/out"
    for name, data in tree_files(tmp_path / "all").items():
        assert SECRET.encode() not in data, name
    assert SECRET not in proc.stdout + proc.stderr
    errors = [line for line in proc.stderr.splitlines() if "missing.pdf" in line]
    assert errors and all(f"s3://{bucket}/in/missing.pdf" in line for line in errors)
