"""`hpdparse render` and `hpdparse review` on a bucket's output (real S3 server): render rebuilds
the finished files in the bucket from its raw/ pages and the source in the bucket; review
copies the output into a local folder and writes its pages there."""

from __future__ import annotations

from pathlib import Path

import boto3
import pytest

from tests.helpers.fakeserver import FakeHPDServer
from tests.helpers.paths import SAMPLES
from tests.storage.conftest import download_tree, upload
from tests.storage.runs import assert_same_output, hpdparse

SAMPLE_FILES = [SAMPLES / "report.pdf", SAMPLES / "scan.png"]


@pytest.fixture(scope="module")
def fake() -> FakeHPDServer:
    with FakeHPDServer() as server:
        yield server


def _converted(bucket: str, fake: FakeHPDServer) -> None:
    upload(bucket, "in/", SAMPLE_FILES)
    engine = ["--engine", "openai", "--server", fake.url, "--dpi", "60", "--quiet"]
    proc = hpdparse("convert", f"s3://{bucket}/in/", "-o", f"s3://{bucket}/out", *engine)
    assert proc.returncode == 0, proc.stderr


def test_render_a_bucket_folder(bucket: str, fake: FakeHPDServer, tmp_path: Path) -> None:
    _converted(bucket, fake)
    download_tree(bucket, "out/", tmp_path / "before")
    client = boto3.client("s3")
    for key in ("out/report/report.md", "out/report/report.json"):
        client.delete_object(Bucket=bucket, Key=key)
    listing = client.list_objects_v2(Bucket=bucket, Prefix="out/report/images/")
    for item in listing.get("Contents", []):
        client.delete_object(Bucket=bucket, Key=item["Key"])
    proc = hpdparse("render", f"s3://{bucket}/out/report", "--quiet")
    assert proc.returncode == 0, proc.stderr
    download_tree(bucket, "out/", tmp_path / "after")
    assert_same_output(tmp_path / "before", tmp_path / "after")


def test_review_a_bucket_output_into_a_local_folder(
    bucket: str, fake: FakeHPDServer, tmp_path: Path
) -> None:
    _converted(bucket, fake)
    review = tmp_path / "review"
    proc = hpdparse("review", f"s3://{bucket}/out/", "-o", str(review))
    assert proc.returncode == 0, proc.stderr
    assert (review / "review.html").is_file()
    page = (review / "report" / "report.review.html").read_text()
    assert page.count("data:image/jpeg;base64,") == 3  # each page drawn from the bucket's source
    assert (review / "scan" / "scan.review.html").is_file()
    missing = hpdparse("review", f"s3://{bucket}/out/")
    assert missing.returncode == 2 and "-o" in missing.stderr
