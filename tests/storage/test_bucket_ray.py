"""`convert --ray local` with inputs and output only in a bucket (real S3 server; no local path
involved): two actors read their pages from the bucket and write raw/ pages there, one actor is
killed mid-run, and every page is converted; a bucket folder that a `--ray local` run left
half done is finished by a plain run, which decodes none of the pages already saved."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

import boto3
import pytest

from hpdparse.sources.rasterize import rasterize_page
from hpdparse.store.report import EXIT_INTERRUPTED
from tests.helpers.fakeserver import AnswerGate, FakeHPDServer, image_fingerprint
from tests.helpers.pdfs import make_pdf
from tests.helpers.ray_processes import decoder_actor_pids, wait_for_no_decoder_actors
from tests.storage.conftest import download_tree, upload
from tests.storage.runs import assert_same_output, hpdparse, popen_hpdparse

pytestmark = [pytest.mark.ray, pytest.mark.slow]

PAGES = 12


def _saved_pages(bucket: str) -> set[str]:
    listing = boto3.client("s3").list_objects_v2(Bucket=bucket, Prefix="out/doc/raw/page-")
    return {item["Key"] for item in listing.get("Contents", []) if item["Key"].endswith(".json")}


def _convert_args(bucket: str, out: str, fake: FakeHPDServer) -> list[str]:
    return [
        "convert", f"s3://{bucket}/in/", "-o", f"s3://{bucket}/{out}",
        "--engine", "openai", "--server", fake.url, "--dpi", "60", "--quiet",
    ]  # fmt: skip


RAY_LOCAL = [
    "--batch-size",
    "2",
    "--ray",
    "local",
    "--ray-actors",
    "2",
    "--ray-cpus-per-actor",
    "1",
]


def test_ray_local_bucket_only_actor_killed_all_pages_converted(
    bucket: str, tmp_path: Path
) -> None:
    pytest.importorskip("ray.data")
    upload(bucket, "in/", [make_pdf(tmp_path / "doc.pdf", PAGES, "ray-bucket")])
    gate = AnswerGate(free=2, limit=420)
    with FakeHPDServer(delay=gate) as fake:
        proc = popen_hpdparse(
            *_convert_args(bucket, "out", fake),
            *RAY_LOCAL,
            "--report",
            f"s3://{bucket}/report.json",
        )
        killed = None
        try:
            deadline = time.monotonic() + 420
            while killed is None and proc.poll() is None and time.monotonic() < deadline:
                if len(_saved_pages(bucket)) >= 2 and (pids := decoder_actor_pids(fake.port)):
                    os.kill(pids[0], signal.SIGKILL)
                    killed = len(_saved_pages(bucket))
                    gate.open()
                time.sleep(0.2)
            _, stderr = proc.communicate(timeout=480)
        finally:
            gate.open()
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


def _saved_numbers(bucket: str) -> set[int]:
    return {int(key.rsplit("page-", 1)[1][:4]) for key in _saved_pages(bucket)}


def _stopped_after_three_pages(
    bucket: str, args: list[str], stop: signal.Signals, gate: AnswerGate
) -> set[int]:
    """Run `hpdparse ARGS`, send it `stop` once 3 pages are saved; the pages saved by then. The
    server's `gate` holds every other answer until the run has ended, so the run cannot finish
    before the signal lands, however loaded the machine is."""
    proc = popen_hpdparse(*args)
    try:
        deadline = time.monotonic() + 420
        while proc.poll() is None and len(_saved_pages(bucket)) < 3:
            assert time.monotonic() < deadline, "no page saved"
            time.sleep(0.2)
        assert proc.poll() is None, proc.communicate()
        proc.send_signal(stop)
        proc.wait(timeout=300)  # reaped first: its rasterizer processes exit once its pid is gone
        _, stderr = proc.communicate(timeout=60)
        if stop != signal.SIGKILL:  # stopped as an interrupted run, with its one line
            assert proc.returncode == EXIT_INTERRUPTED, stderr[-3000:]
            assert "Traceback" not in stderr, stderr[-3000:]
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
        gate.open()
    assert wait_for_no_decoder_actors(120)
    keys = boto3.client("s3").list_objects_v2(Bucket=bucket, Prefix="out/")["Contents"]
    assert "out/doc/doc.md" not in {item["Key"] for item in keys}
    return _saved_numbers(bucket)


@pytest.mark.parametrize(
    "first, stop, then",
    [
        ("ray", signal.SIGINT, "plain"),
        ("ray", signal.SIGTERM, "plain"),
        ("plain", signal.SIGKILL, "ray"),
    ],
    ids=["ray-ctrl-c-plain", "ray-sigterm-plain", "plain-sigkill-ray"],
)
def test_a_bucket_folder_started_by_one_runner_is_finished_by_the_other(
    bucket: str, tmp_path: Path, first: str, stop: signal.Signals, then: str
) -> None:
    """Started by `--ray local` and interrupted (Ctrl-C, or `kill`, which stops a run the same
    way), or by a plain run and killed (SIGKILL); finished by the other: identical output, no
    saved page decoded again."""
    pytest.importorskip("ray.data")
    pages = 30
    pdf = make_pdf(tmp_path / "doc.pdf", pages, "ray-and-plain")
    upload(bucket, "in/", [pdf])
    page_of = {
        image_fingerprint(rasterize_page(str(pdf), n, 60)[0]): n for n in range(1, pages + 1)
    }
    runner = {"ray": RAY_LOCAL, "plain": []}
    with FakeHPDServer() as fake:
        reference = hpdparse(*_convert_args(bucket, "ref", fake))
        assert reference.returncode == 0, reference.stderr
        fake.delay = gate = AnswerGate(free=3, limit=420)
        args = _convert_args(bucket, "out", fake) + runner[first]
        saved = _stopped_after_three_pages(bucket, args, stop, gate)
        assert 3 <= len(saved) < pages
        fake.delay = 0.0
        fake.clear_log()
        rest = hpdparse(*_convert_args(bucket, "out", fake), *runner[then])
        assert rest.returncode == 0, rest.stderr[-3000:]
        decoded = [page_of[f] for f in fake.fingerprints()]
    assert sorted(decoded) == sorted(set(range(1, pages + 1)) - saved)  # each once, none saved
    download_tree(bucket, "ref/", tmp_path / "ref")
    download_tree(bucket, "out/", tmp_path / "out")
    assert_same_output(tmp_path / "ref", tmp_path / "out")
