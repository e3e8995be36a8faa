"""`convert --ray local` with inputs and output only in a bucket (real S3 server; no local path
involved): two actors read their pages from the bucket and write raw/ pages there, one actor is
killed mid-run, and every page is converted."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

import boto3
import pytest

from tests.helpers.fakeserver import FakeHPDServer
from tests.helpers.pdfs import make_pdf
from tests.helpers.ray_processes import decoder_actor_pids
from tests.storage.conftest import upload
from tests.storage.runs import popen_hpdparse

pytestmark = [pytest.mark.ray, pytest.mark.slow]

PAGES = 12


def _saved_pages(bucket: str) -> set[str]:
    listing = boto3.client("s3").list_objects_v2(Bucket=bucket, Prefix="out/doc/raw/page-")
    return {item["Key"] for item in listing.get("Contents", []) if item["Key"].endswith(".json")}


def test_ray_local_bucket_only_actor_killed_all_pages_converted(
    bucket: str, tmp_path: Path
) -> None:
    pytest.importorskip("ray.data")
    upload(bucket, "in/", [make_pdf(tmp_path / "doc.pdf", PAGES, "ray-bucket")])
    with FakeHPDServer(delay=0.5) as fake:
        proc = popen_hpdparse(
            "convert",
            f"s3://{bucket}/in/",
            "-o",
            f"s3://{bucket}/out",
            "--engine",
            "openai",
            "--server",
            fake.url,
            "--dpi",
            "60",
            "--batch-size",
            "2",
            "--ray",
            "local",
            "--ray-actors",
            "2",
            "--ray-cpus-per-actor",
            "1",
            "--report",
            f"s3://{bucket}/report.json",
            "--quiet",
        )
        killed = None
        try:
            deadline = time.monotonic() + 420
            while killed is None and proc.poll() is None and time.monotonic() < deadline:
                if len(_saved_pages(bucket)) >= 2 and (pids := decoder_actor_pids()):
                    os.kill(pids[0], signal.SIGKILL)
                    killed = len(_saved_pages(bucket))
                time.sleep(0.2)
            _, stderr = proc.communicate(timeout=480)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
    assert killed is not None and killed < PAGES, "no actor was killed mid-run"
    assert proc.returncode == 0, stderr[-3000:]
    assert len(_saved_pages(bucket)) == PAGES
    body = boto3.client("s3").get_object(Bucket=bucket, Key="report.json")["Body"].read()
    report = json.loads(body)
    assert report["documents"][0]["status"] == "converted"
    assert any(actor["restarts"] >= 1 for actor in report["ray"]["actors"])
    keys = boto3.client("s3").list_objects_v2(Bucket=bucket, Prefix="out/doc/")["Contents"]
    assert "out/doc/doc.md" in {item["Key"] for item in keys}
