"""An S3-compatible server on 127.0.0.1 for the object-storage tests (tests/helpers/s3server.py):
moto's server started once per session behind a `Gate`, a fresh bucket per test, and the
environment every client (s3fs in this process and in the hpdparse processes the tests start)
reads: AWS_ENDPOINT_URL and test-only credentials."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

pytest.importorskip("s3fs")
pytest.importorskip("moto.server")

from tests.helpers.s3server import Gate, MotoServer

SECRET = "hpdparse-test-secret-8c1f0e"
"""The test secret access key: no file, report, log or message may ever contain it."""

_ENV = {
    "AWS_ACCESS_KEY_ID": "hpdparse-test-key",
    "AWS_SECRET_ACCESS_KEY": SECRET,
    "AWS_DEFAULT_REGION": "us-east-1",
    "AWS_EC2_METADATA_DISABLED": "true",
    "AWS_CONFIG_FILE": "/nonexistent/aws-config",
    "AWS_SHARED_CREDENTIALS_FILE": "/nonexistent/aws-credentials",
}


@dataclass
class S3:
    server: MotoServer
    gate: Gate

    @property
    def endpoint(self) -> str:
        return self.gate.url


@pytest.fixture(scope="session")
def s3(tmp_path_factory: pytest.TempPathFactory) -> Iterator[S3]:
    server = MotoServer(tmp_path_factory.mktemp("moto") / "access.log")
    gate = Gate(server.port)
    env = {**_ENV, "AWS_ENDPOINT_URL": gate.url}
    saved = {k: os.environ.get(k) for k in [*env, "AWS_PROFILE", "AWS_SESSION_TOKEN"]}
    os.environ.pop("AWS_PROFILE", None)
    os.environ.pop("AWS_SESSION_TOKEN", None)
    os.environ.update(env)
    try:
        yield S3(server, gate)
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        gate.close()
        server.stop()


@pytest.fixture
def bucket(s3: S3) -> str:
    """A new, empty bucket (the store reachable again if a test closed its gate)."""
    import boto3

    if s3.gate._server is None:
        s3.gate.open()
    name = f"test-{uuid.uuid4().hex[:12]}"
    boto3.client("s3", endpoint_url=s3.server.url).create_bucket(Bucket=name)
    return name


def upload(bucket: str, prefix: str, files: list[Path]) -> None:
    import boto3

    client = boto3.client("s3", endpoint_url=os.environ["AWS_ENDPOINT_URL"])
    for path in files:
        client.put_object(Bucket=bucket, Key=f"{prefix}{path.name}", Body=path.read_bytes())


def download_tree(bucket: str, prefix: str, target: Path) -> None:
    """Every object under s3://bucket/prefix into `target`, keys as relative paths."""
    import boto3

    client = boto3.client("s3", endpoint_url=os.environ["AWS_ENDPOINT_URL"])
    for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
        for item in page.get("Contents", []):
            dest = target / item["Key"][len(prefix) :]
            dest.parent.mkdir(parents=True, exist_ok=True)
            dest.write_bytes(client.get_object(Bucket=bucket, Key=item["Key"])["Body"].read())
