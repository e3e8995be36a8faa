"""A bucket run that dies, or whose store goes away, is finished by a rerun with nothing lost
and no finished page decoded again (real S3 server, fake HPD server, `hpdparse` as users run
it)."""

from __future__ import annotations

import signal
import threading
import time
from pathlib import Path

import boto3
import pytest

from tests.helpers.fakeserver import ChatRequest, FakeHPDServer
from tests.helpers.paths import SAMPLES
from tests.storage.conftest import S3, download_tree, upload
from tests.storage.runs import assert_same_output, hpdparse, popen_hpdparse

SAMPLE_FILES = sorted(p for p in SAMPLES.iterdir() if p.is_file())
LAST_PAGE = ("report", 3)
# Where the store is gone, what is checked is the error, not how long the retries take: one
# retry (botocore's default backoff) instead of four.
ONE_RETRY = ["--storage-option", 'config_kwargs={"retries": {"max_attempts": 2}}']


def _engine(fake: FakeHPDServer) -> list[str]:
    return ["--engine", "openai", "--server", fake.url, "--dpi", "60", "--quiet"]


def _keys(bucket: str, prefix: str) -> set[str]:
    listing = boto3.client("s3").list_objects_v2(Bucket=bucket, Prefix=prefix)
    return {item["Key"][len(prefix) :] for item in listing.get("Contents", [])}


def _wait(condition, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.2)


def _reference(bucket: str, fake: FakeHPDServer, tmp_path: Path) -> Path:
    """The output of an uninterrupted bucket run, copied here."""
    proc = hpdparse("convert", f"s3://{bucket}/in/", "-o", f"s3://{bucket}/ref", *_engine(fake))
    assert proc.returncode == 0, proc.stderr
    download_tree(bucket, "ref/", tmp_path / "ref")
    return tmp_path / "ref"


def _others_finished(bucket: str) -> bool:
    keys = _keys(bucket, "out/")
    return {"memo/memo.md", "paper/paper.md", "scan/scan.md"} <= keys and {
        "report/raw/page-0001.json",
        "report/raw/page-0002.json",
    } <= keys


@pytest.fixture
def fake() -> FakeHPDServer:
    with FakeHPDServer() as server:
        yield server


def test_a_bucket_run_killed_then_rerun(bucket: str, fake: FakeHPDServer, tmp_path: Path) -> None:
    upload(bucket, "in/", SAMPLE_FILES)
    reference = _reference(bucket, fake, tmp_path)
    fake.delay = lambda request: 600 if request.page_id == LAST_PAGE else 0
    proc = popen_hpdparse(
        "convert", f"s3://{bucket}/in/", "-o", f"s3://{bucket}/out", *_engine(fake)
    )
    try:
        _wait(lambda: _others_finished(bucket) and LAST_PAGE in fake.page_ids())
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()  # reaped first: its rasterizer processes exit once its pid is gone
        proc.communicate(timeout=60)
    assert "report/report.md" not in _keys(bucket, "out/")
    fake.delay = 0.0
    fake.clear_log()
    rerun = hpdparse("convert", f"s3://{bucket}/in/", "-o", f"s3://{bucket}/out", *_engine(fake))
    assert rerun.returncode == 0, rerun.stderr
    assert fake.page_ids() == [LAST_PAGE]  # the pages saved before the kill are not decoded again
    download_tree(bucket, "out/", tmp_path / "out")
    assert_same_output(reference, tmp_path / "out")


def test_the_store_gone_mid_run_then_back(
    bucket: str, fake: FakeHPDServer, s3: S3, tmp_path: Path
) -> None:
    upload(bucket, "in/", SAMPLE_FILES)
    reference = _reference(bucket, fake, tmp_path)
    store_closed = threading.Event()

    def answer_the_last_page_once_the_store_is_gone(request: ChatRequest) -> float:
        if request.page_id == LAST_PAGE:
            store_closed.wait(120)
        return 0.0

    fake.delay = answer_the_last_page_once_the_store_is_gone
    proc = popen_hpdparse(
        "convert", f"s3://{bucket}/in/", "-o", f"s3://{bucket}/out", *_engine(fake), *ONE_RETRY
    )
    try:
        _wait(lambda: _others_finished(bucket) and LAST_PAGE in fake.page_ids())
        s3.gate.close()  # connection refused from here on, while report page 3 is being decoded
        store_closed.set()
        _, stderr = proc.communicate(timeout=300)
    finally:
        store_closed.set()
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
        s3.gate.open()
    assert proc.returncode == 1
    assert "Traceback" not in stderr
    errors = [line for line in stderr.splitlines() if line.startswith("error:")]
    assert errors and all(f"s3://{bucket}/out/report" in line for line in errors), errors
    assert any("cannot reach the store" in line for line in errors), errors
    fake.delay = 0.0
    fake.clear_log()
    rerun = hpdparse("convert", f"s3://{bucket}/in/", "-o", f"s3://{bucket}/out", *_engine(fake))
    assert rerun.returncode == 0, rerun.stderr
    assert fake.page_ids() == [LAST_PAGE]
    download_tree(bucket, "out/", tmp_path / "out")
    assert_same_output(reference, tmp_path / "out")
