"""Every way a store can fail, against a real S3 server (moto behind a `Gate` on 127.0.0.1):
each is one line naming the URL, the batch goes on where it can, and the exit code says it (1;
2 for a URL that cannot be used at all). Transient failures are retried."""

from __future__ import annotations

import contextlib
import json
import os
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from hpdparse.errors import InputError
from hpdparse.sources.location import UrlSource
from hpdparse.sources.rasterize import close_cached_documents, rasterize_page
from tests.helpers.fakeserver import FakeHPDServer
from tests.helpers.paths import SAMPLES
from tests.helpers.pdfs import make_pdf
from tests.storage.conftest import S3, SECRET, upload
from tests.storage.runs import hpdparse

MEMO = SAMPLES / "memo.pdf"


@pytest.fixture(scope="module")
def fake() -> FakeHPDServer:
    with FakeHPDServer() as server:
        yield server


def _openai(fake: FakeHPDServer) -> list[str]:
    return ["--engine", "openai", "--server", fake.url, "--dpi", "60", "--quiet"]


def _errors(stderr: str) -> list[str]:
    assert "Traceback" not in stderr, stderr
    return [line for line in stderr.splitlines() if line.startswith("error:")]


def test_no_credentials(bucket: str, fake: FakeHPDServer, tmp_path: Path) -> None:
    upload(bucket, "in/", [MEMO])
    no_keys = {"AWS_ACCESS_KEY_ID": "", "AWS_SECRET_ACCESS_KEY": ""}
    inputs = hpdparse(
        "convert", f"s3://{bucket}/in/", "-o", str(tmp_path), *_openai(fake), env=no_keys
    )
    assert inputs.returncode == 1
    (line,) = _errors(inputs.stderr)
    assert line.startswith(f"error: s3://{bucket}/in/: no credentials")
    output = hpdparse("convert", str(MEMO), "-o", f"s3://{bucket}/out", *_openai(fake), env=no_keys)
    assert output.returncode == 1
    (line,) = _errors(output.stderr)
    assert f"s3://{bucket}/out/memo" in line and "no credentials" in line


def test_bucket_missing(fake: FakeHPDServer, s3: S3) -> None:
    proc = hpdparse("convert", str(MEMO), "-o", "s3://no-such-bucket-here/out", *_openai(fake))
    assert proc.returncode == 1
    (line,) = _errors(proc.stderr)
    assert "s3://no-such-bucket-here/out/memo" in line and "bucket not found" in line
    proc = hpdparse(
        "convert",
        "s3://no-such-bucket-here/in/",
        "-o",
        "s3://no-such-bucket-here/o",
        *_openai(fake),
    )
    assert proc.returncode == 1
    assert _errors(proc.stderr) == ["error: s3://no-such-bucket-here/in/: no such file or folder"]


def test_objects_that_are_not_documents_fail_and_the_batch_goes_on(
    bucket: str, fake: FakeHPDServer, tmp_path: Path
) -> None:
    (tmp_path / "notes.pdf").write_text("just some text, not a PDF\n")
    (tmp_path / "empty.pdf").write_bytes(b"")
    upload(bucket, "in/", [MEMO, tmp_path / "notes.pdf", tmp_path / "empty.pdf"])
    report = tmp_path / "report.json"
    proc = hpdparse(
        "convert",
        f"s3://{bucket}/in/",
        f"s3://{bucket}/in/gone.pdf",
        "-o",
        f"s3://{bucket}/out",
        *_openai(fake),
        "--report",
        str(report),
    )
    assert proc.returncode == 1
    assert sorted(_errors(proc.stderr)) == [
        f"error: s3://{bucket}/in/empty.pdf: empty file (0 bytes)",
        f"error: s3://{bucket}/in/gone.pdf: no such file or folder",
        f"error: s3://{bucket}/in/notes.pdf: not a PDF or supported image",
    ]
    statuses = {d["source"]: d["status"] for d in json.loads(report.read_text())["documents"]}
    assert statuses[f"s3://{bucket}/in/memo.pdf"] == "converted"


def test_an_object_deleted_between_planning_and_reading(bucket: str) -> None:
    import boto3

    upload(bucket, "in/", [MEMO])
    url = f"s3://{bucket}/in/memo.pdf"
    assert UrlSource(url).is_file()
    boto3.client("s3").delete_object(Bucket=bucket, Key="in/memo.pdf")
    close_cached_documents()
    with pytest.raises(InputError) as caught:
        rasterize_page(url, 1, 72)
    assert str(caught.value) == f"{url}: not found"


@pytest.mark.parametrize(
    "url, message",
    [
        ("foo://bucket/a.pdf", "foo://bucket/a.pdf: unknown URL scheme foo://"),
        ("gs://bucket/a.pdf", "gs://bucket/a.pdf: gs:// needs the gcs extra"),
        ("az://container/a.pdf", "az://container/a.pdf: az:// needs the azure extra"),
    ],
)
def test_a_url_that_cannot_be_used_is_a_usage_error(url: str, message: str, tmp_path) -> None:
    library = {"gs": "gcsfs", "az": "adlfs"}.get(url.split(":", 1)[0])
    env = {}
    if library is not None:  # the dev extra installs it: a package of that name that cannot load
        shadow = tmp_path / "shadow" / library
        shadow.mkdir(parents=True)
        (shadow / "__init__.py").write_text(f"raise ImportError('{library} left out')\n")
        env["PYTHONPATH"] = os.pathsep.join([str(shadow.parent), os.environ.get("PYTHONPATH", "")])
    proc = hpdparse("convert", url, "-o", str(tmp_path / "out"), env=env)
    assert proc.returncode == 2
    (line,) = _errors(proc.stderr)
    assert line.startswith(f"error: {message}")


def test_5xx_answers_are_retried(bucket: str, fake: FakeHPDServer, s3: S3) -> None:
    upload(bucket, "in/", [MEMO])
    s3.gate.fault, s3.gate.faults = "503", 3
    proc = hpdparse("convert", f"s3://{bucket}/in/", "-o", f"s3://{bucket}/out", *_openai(fake))
    assert proc.returncode == 0, proc.stderr
    assert s3.gate.faults <= 0  # the three 503 answers were given, and retried


def test_a_store_that_keeps_failing_is_one_line_per_document(
    bucket: str, fake: FakeHPDServer, s3: S3, tmp_path: Path
) -> None:
    s3.gate.fault, s3.gate.faults = "503", 10_000
    # One retry, not four: what is checked is the error line, not the retries' backoff.
    one_retry = ["--storage-option", 'config_kwargs={"retries": {"max_attempts": 2}}']
    try:
        proc = hpdparse(
            "convert", str(MEMO), "-o", f"s3://{bucket}/out", *_openai(fake), *one_retry
        )
    finally:
        s3.gate.faults = 0
    assert proc.returncode == 1
    (line,) = _errors(proc.stderr)
    assert line.startswith(f"error: s3://{bucket}/out/memo")
    assert line.endswith("Please reduce your request rate.")  # the store's own words


def test_a_store_that_does_not_answer_times_out(bucket: str, fake: FakeHPDServer, s3: S3) -> None:
    quick = [
        "--storage-option",
        'config_kwargs={"read_timeout": 1, "retries": {"max_attempts": 2}}',
    ]
    quick += ["--storage-option", "key=hpdparse-test-key", "--storage-option", f"secret={SECRET}"]
    s3.gate.fault, s3.gate.faults = "hang", 10_000
    try:
        proc = hpdparse("convert", f"s3://{bucket}/in/", "-o", "out", *_openai(fake), *quick)
    finally:
        s3.gate.faults = 0
        s3.gate.close()
        s3.gate.open()
    assert proc.returncode == 1
    (line,) = _errors(proc.stderr)
    assert line.startswith(f"error: s3://{bucket}/in/: the store did not answer in time")
    assert SECRET not in proc.stderr


@contextlib.contextmanager
def _iam_enforced(s3: S3, policy: dict) -> Iterator[dict[str, str]]:
    """An IAM user with `policy`, and the server checking every request's signature and
    permissions (moto's /moto-api/reset-auth) until the block ends: the user's credentials, as
    environment variables."""
    import boto3

    iam = boto3.client("iam", endpoint_url=s3.server.url)
    user = f"user-{uuid.uuid4().hex[:8]}"
    iam.create_user(UserName=user)
    iam.put_user_policy(UserName=user, PolicyName="test", PolicyDocument=json.dumps(policy))
    key = iam.create_access_key(UserName=user)["AccessKey"]
    env = {"AWS_ACCESS_KEY_ID": key["AccessKeyId"], "AWS_SECRET_ACCESS_KEY": key["SecretAccessKey"]}
    _reset_auth(s3, b"0")  # from the next request on
    try:
        yield env
    finally:
        _reset_auth(s3, b"inf")


def _reset_auth(s3: S3, count: bytes) -> None:
    request = urllib.request.Request(
        f"{s3.server.url}/moto-api/reset-auth",
        data=count,
        headers={"Content-Type": "text/plain"},
        method="POST",
    )
    urllib.request.urlopen(request).close()


def test_access_denied(bucket: str, fake: FakeHPDServer, s3: S3, tmp_path: Path) -> None:
    upload(bucket, "in/", [MEMO])
    no_objects = {
        "Version": "2012-10-17",
        "Statement": [
            {"Effect": "Allow", "Action": "s3:*", "Resource": "*"},
            {"Effect": "Deny", "Action": ["s3:GetObject", "s3:PutObject"], "Resource": "*"},
        ],
    }
    with _iam_enforced(s3, no_objects) as env:
        reading = hpdparse(
            "convert", f"s3://{bucket}/in/", "-o", str(tmp_path / "out"), *_openai(fake), env=env
        )
        one = hpdparse(
            "convert", f"s3://{bucket}/in/memo.pdf", "-o", str(tmp_path), *_openai(fake), env=env
        )
        writing = hpdparse(
            "convert", str(MEMO), "-o", f"s3://{bucket}/out", *_openai(fake), env=env
        )
    assert reading.returncode == 1
    (line,) = _errors(reading.stderr)
    # Finding the inputs already asks for the prefix as an object (a HEAD, which needs
    # s3:GetObject): refused, as AWS refuses it.
    assert line.startswith(f"error: s3://{bucket}/in/: access denied"), line
    assert one.returncode == 1
    (line,) = _errors(one.stderr)
    assert line.startswith(f"error: s3://{bucket}/in/memo.pdf: access denied"), line
    assert writing.returncode == 1
    (line,) = _errors(writing.stderr)
    assert line.startswith(f"error: s3://{bucket}/out/memo: cannot write the output folder"), line
    assert "access denied" in line
    for proc in (reading, one, writing):
        assert env["AWS_SECRET_ACCESS_KEY"] not in proc.stdout + proc.stderr


def test_a_document_that_cannot_be_finished_fails_alone(
    bucket: str, fake: FakeHPDServer, s3: S3, tmp_path: Path
) -> None:
    """Documents are finished in the background: one whose .json the store refuses fails, on
    one line and with exit code 1, and has no .md; the documents around it are finished, each
    with its .md written after every other object of it."""
    pdfs = [make_pdf(tmp_path / f"{stem}.pdf", 3, stem) for stem in ("a", "b", "c")]
    no_b_json = {
        "Version": "2012-10-17",
        "Statement": [
            {"Effect": "Allow", "Action": "s3:*", "Resource": "*"},
            {
                "Effect": "Deny",
                "Action": "s3:PutObject",
                "Resource": f"arn:aws:s3:::{bucket}/out/b/b.json",
            },
        ],
    }
    report = tmp_path / "report.json"
    since = s3.server.log_offset()
    with _iam_enforced(s3, no_b_json) as env:
        proc = hpdparse(
            "convert", *map(str, pdfs), "-o", f"s3://{bucket}/out", "--report", str(report),
            *_openai(fake), env=env,
        )  # fmt: skip
    assert proc.returncode == 1
    (line,) = _errors(proc.stderr)
    assert line.startswith(f"error: s3://{bucket}/out/b: cannot write the output folder"), line
    assert "access denied" in line.lower(), line
    documents = json.loads(report.read_text())["documents"]
    assert {Path(d["source"]).stem: d["status"] for d in documents} == {
        "a": "converted",
        "b": "failed",
        "c": "converted",
    }
    puts = [key for kind, key in s3.server.request_log(since, bucket) if kind == "PUT"]
    assert f"/{bucket}/out/b/b.md" not in puts
    for stem in ("a", "c"):
        own = [key for key in puts if key.startswith(f"/{bucket}/out/{stem}/")]
        assert len(own) == 3 * 3 + 4  # 2 raw objects and a figure a page, 4 for the document
        assert own[-1] == f"/{bucket}/out/{stem}/{stem}.md"
