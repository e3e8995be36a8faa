"""`gs://` and `az://` end to end, each against a real emulator on 127.0.0.1 (gcp-storage-emulator
for the GCS JSON API, Azurite for Azure Blob Storage; tests/helpers/cloudemulators.py) reached by
gcsfs and adlfs, with hpdparse run as users run it: a bucket-to-bucket run writes what a local run
writes, a killed run resumes from its saved pages, `render` rebuilds a bucket folder, and a
missing bucket or container is one line and exit 1. The emulators' inputs and outputs are put
and read by the clouds' own SDKs. Each cloud skips, saying why, where its emulator is not
installed (`.ci/install-test-tools.sh` installs Azurite; the dev extra the GCS emulator)."""

from __future__ import annotations

import json
import shutil
import signal
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers.cloudemulators import (
    AZURITE_KEY,
    Emulator,
    start_azurite,
    start_gcs,
    unavailable,
)
from tests.helpers.fakeserver import FakeHPDServer
from tests.helpers.paths import SAMPLES
from tests.storage.runs import assert_same_output, hpdparse, popen_hpdparse, tree_files

SAMPLE_FILES = sorted(p for p in SAMPLES.iterdir() if p.is_file())
LAST_PAGE = ("report", 3)


@pytest.fixture(scope="module", params=["gs", "az"])
def cloud(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory):
    scheme = request.param
    pytest.importorskip({"gs": "gcsfs", "az": "adlfs"}[scheme])
    start = start_gcs if scheme == "gs" else start_azurite
    emulator = start(tmp_path_factory.mktemp(f"{scheme}-emulator") / "emulator.log")
    if emulator is None:
        pytest.skip(f"{scheme}:// emulator not available: {unavailable[scheme]}")
    try:
        yield emulator
    finally:
        emulator.stop()


@pytest.fixture
def bucket(cloud: Emulator) -> str:
    name = f"test-{uuid.uuid4().hex[:12]}"
    cloud.create_bucket(name)
    return name


@pytest.fixture(scope="module")
def fake() -> Iterator[FakeHPDServer]:
    with FakeHPDServer() as server:
        yield server


@pytest.fixture(scope="module")
def local_output(fake: FakeHPDServer, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The samples converted from disk to disk: what every bucket run must write."""
    out = tmp_path_factory.mktemp("local") / "out"
    proc = hpdparse("convert", *map(str, SAMPLE_FILES), "-o", str(out), *_engine(fake))
    assert proc.returncode == 0, proc.stderr
    return out


def _engine(fake: FakeHPDServer) -> list[str]:
    return ["--engine", "openai", "--server", fake.url, "--dpi", "60", "--quiet"]


def _convert(cloud: Emulator, fake: FakeHPDServer, *args: str):
    return hpdparse("convert", *args, *_engine(fake), env=cloud.env)


def _wait(condition, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.2)


def test_bucket_to_bucket_writes_what_a_local_run_writes_and_overwrite_replaces_it(
    cloud: Emulator, bucket: str, fake: FakeHPDServer, local_output: Path, tmp_path: Path
) -> None:
    cloud.upload(bucket, "in/", SAMPLE_FILES)
    cloud.put(bucket, "in/deeper/notes.txt", b"not an input")
    fake.clear_log()
    report = tmp_path / "report.json"
    source, out = cloud.url(bucket, "in/"), cloud.url(bucket, "out/")
    first = hpdparse(
        "convert", source, "-o", out, "--report", str(report), *_engine(fake)[:-1], env=cloud.env
    )
    assert first.returncode == 0, first.stderr
    # Progress lines and the fake server's one warning; nothing from the storage libraries.
    others = [
        line
        for line in first.stderr.splitlines()
        if not line.startswith("[") and "answered without log-probabilities" not in line
    ]
    assert others == [], first.stderr
    assert fake.chat_count == 7  # every sample page, once
    sources = [d["source"] for d in json.loads(report.read_text())["documents"]]
    assert sorted(sources) == [source + path.name for path in SAMPLE_FILES]  # as the user wrote
    cloud.download_tree(bucket, "out/", tmp_path / "first")
    assert_same_output(local_output, tmp_path / "first")
    # Objects an earlier run left beside the finished ones: --overwrite removes them.
    cloud.put(bucket, "out/report/report.review.html", b"old")
    cloud.put(bucket, "out/report/images/page-0009-figure-01.png", b"old")
    fake.clear_log()
    pdfs = cloud.url(bucket, "in/*.pdf")
    redo = _convert(cloud, fake, pdfs, "-o", cloud.url(bucket, "out"), "--overwrite")
    assert redo.returncode == 0, redo.stderr
    assert fake.chat_count == 6  # the three PDFs' pages again, not the image
    cloud.download_tree(bucket, "out/", tmp_path / "redo")
    assert_same_output(local_output, tmp_path / "redo")


def _others_finished(cloud: Emulator, bucket: str) -> bool:
    keys = cloud.keys(bucket, "out/")
    return {"memo/memo.md", "paper/paper.md", "scan/scan.md"} <= keys and {
        "report/raw/page-0001.json",
        "report/raw/page-0002.json",
    } <= keys


def test_a_killed_bucket_run_resumes_from_its_saved_pages(
    cloud: Emulator, bucket: str, fake: FakeHPDServer, local_output: Path, tmp_path: Path
) -> None:
    cloud.upload(bucket, "in/", SAMPLE_FILES)
    cloud.put(bucket, "in/deeper/notes.txt", b"not an input")
    source, out = cloud.url(bucket, "in/"), cloud.url(bucket, "out")
    fake.clear_log()
    fake.delay = lambda request: 600 if request.page_id == LAST_PAGE else 0
    proc = popen_hpdparse("convert", source, "-r", "-o", out, *_engine(fake), env=cloud.env)
    try:
        _wait(lambda: _others_finished(cloud, bucket) and LAST_PAGE in fake.page_ids())
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        proc.communicate(timeout=60)
        fake.delay = 0.0
    keys = cloud.keys(bucket, "out/report/")
    assert "report.md" not in keys  # <stem>.md, written last, says the document is not done
    fake.clear_log()
    rerun = _convert(cloud, fake, source, "-r", "-o", out)
    assert rerun.returncode == 0, rerun.stderr
    # The finished documents are skipped and the saved pages not decoded again.
    assert fake.page_ids() == [LAST_PAGE]
    cloud.download_tree(bucket, "out/", tmp_path / "out")
    assert_same_output(local_output, tmp_path / "out")


def test_render_rebuilds_a_bucket_folder(
    cloud: Emulator, bucket: str, fake: FakeHPDServer, local_output: Path, tmp_path: Path
) -> None:
    cloud.upload(bucket, "in/", [SAMPLES / "report.pdf"])
    proc = _convert(cloud, fake, cloud.url(bucket, "in/report.pdf"), "-o", cloud.url(bucket, "o"))
    assert proc.returncode == 0, proc.stderr
    removed = ["o/report/report.md", "o/report/report.json"]
    removed += [f"o/report/{key}" for key in cloud.keys(bucket, "o/report/") if "images/" in key]
    for key in removed:
        cloud.delete(bucket, key)
    rendered = hpdparse("render", cloud.url(bucket, "o/report"), "--quiet", env=cloud.env)
    assert rendered.returncode == 0, rendered.stderr
    cloud.download_tree(bucket, "o/", tmp_path / "after")
    shutil.copytree(local_output / "report", tmp_path / "expected" / "report")
    assert_same_output(tmp_path / "expected", tmp_path / "after")


def test_a_missing_bucket_is_one_line_and_exit_1(
    cloud: Emulator, fake: FakeHPDServer, tmp_path: Path
) -> None:
    missing = cloud.url("no-such-bucket-here", "out")
    report = tmp_path / "report.json"
    proc = _convert(cloud, fake, str(SAMPLES / "memo.pdf"), "-o", missing, "--report", str(report))
    assert proc.returncode == 1
    assert "Traceback" not in proc.stderr
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, proc.stderr
    assert f"{missing}/memo" in errors[0]
    missing_one = "container" if cloud.scheme == "az" else "bucket"
    assert errors[0].endswith(f"cannot write the output folder: {missing_one} not found"), errors
    inputs = _convert(cloud, fake, cloud.url("no-such-bucket-here", "in/"), "-o", str(tmp_path))
    assert inputs.returncode == 1
    assert [line for line in inputs.stderr.splitlines() if line.startswith("error:")] == [
        f"error: {cloud.url('no-such-bucket-here', 'in/')}: no such file or folder"
    ]
    for text in (proc.stdout + proc.stderr, inputs.stdout + inputs.stderr, report.read_text()):
        assert AZURITE_KEY not in text
    assert all(AZURITE_KEY.encode() not in data for data in tree_files(tmp_path).values())
