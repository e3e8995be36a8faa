"""URLs and storage options (`hpdparse.remote`), without a server: which strings are URLs, the
--storage-option pairs, and secrets kept out of messages."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from hpdparse import remote
from hpdparse.sources.location import UrlSource, source_location


@pytest.fixture(autouse=True)
def no_options():
    remote.set_storage_options({})
    yield
    remote.set_storage_options({})


@pytest.mark.parametrize(
    "text, url",
    [
        ("s3://bucket/a.pdf", True),
        ("https://example.org/a.pdf", True),
        ("gs://b/", True),
        ("file:///tmp/a.pdf", False),
        ("/tmp/a.pdf", False),
        ("C:\\docs\\a.pdf", False),
        ("notes:2026.pdf", False),
    ],
)
def test_is_url(text: str, url: bool) -> None:
    assert remote.is_url(text) is url


def test_source_location() -> None:
    assert source_location("s3://b/in/a.PDF") == UrlSource("s3://b/in/a.PDF")
    assert source_location("s3://b/in/a.PDF").stem == "a"
    assert source_location("s3://b/in/a.PDF").suffix == ".PDF"
    assert source_location("file:///tmp/a.pdf") == Path("/tmp/a.pdf")


def test_storage_options_are_json_or_text_and_reach_child_processes(monkeypatch) -> None:
    options = remote.parse_storage_options(
        ("anon=true", "endpoint_url=http://127.0.0.1:9000", 'config_kwargs={"read_timeout": 5}')
    )
    assert options == {
        "anon": True,
        "endpoint_url": "http://127.0.0.1:9000",
        "config_kwargs": {"read_timeout": 5},
    }
    remote.set_storage_options(options)
    monkeypatch.setattr(remote, "_options", None)  # as a new process sees it
    assert remote.storage_options() == options
    with pytest.raises(ValueError, match="--storage-option secret: not KEY=VALUE"):
        remote.parse_storage_options(("secret",))


def test_secrets_never_in_messages(monkeypatch) -> None:
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "env-secret-value")
    remote.set_storage_options({"secret": "option-secret-value", "client_kwargs": {"t": "tok-123"}})
    message = remote.storage_message(
        "https://user:pw@host/a.pdf",
        OSError(5, "failed with option-secret-value and env-secret-value and tok-123"),
    )
    assert message == "https://host/a.pdf: failed with *** and *** and ***"


def test_azure_secrets_from_the_environment_never_in_messages(monkeypatch) -> None:
    key = "YXp1cmUta2V5LXZhbHVl+/=="
    monkeypatch.setenv(
        "AZURE_STORAGE_CONNECTION_STRING",
        f"DefaultEndpointsProtocol=https;AccountName=acct;AccountKey={key};EndpointSuffix=x",
    )
    monkeypatch.setenv("AZURE_STORAGE_SAS_TOKEN", "sv=2024&sig=sas-signature")
    message = remote.storage_message(
        "az://docs/a.pdf", OSError(5, f"signed with {key}, token sv=2024&sig=sas-signature")
    )
    assert message == "az://docs/a.pdf: signed with ***, token ***"


def test_the_first_line_of_a_multi_line_storage_error() -> None:
    error = RuntimeError("The specified blob is gone.\nRequestId:1\nContent: <?xml ...>")
    assert remote.storage_reason(error) == "RuntimeError: The specified blob is gone."


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("abfs://docs@account.dfs.core.windows.net/a.pdf", None),
        ("az://docs@account/a.pdf", None),
        ("az://docs:key@account/a.pdf", "az://account/a.pdf"),
        ("s3://key:secret@bucket/a.pdf", "s3://bucket/a.pdf"),
        ("https://token@host/a.pdf and https://u:p@h/b", "https://host/a.pdf and https://h/b"),
    ],
)
def test_an_azure_container_is_a_name_not_a_credential(text: str, shown: str | None) -> None:
    assert remote.redact(text) == (text if shown is None else shown)


def test_unknown_scheme_is_a_usage_error() -> None:
    with pytest.raises(remote.StorageUsageError, match="unknown URL scheme nope://"):
        remote.filesystem("nope://bucket/a.pdf")


@pytest.mark.parametrize(
    "url, library, extra",
    [
        ("s3://bucket/a.pdf", "s3fs", "s3"),
        ("s3a://bucket/a.pdf", "s3fs", "s3"),
        ("gs://bucket/a.pdf", "gcsfs", "gcs"),
        ("gcs://bucket/a.pdf", "gcsfs", "gcs"),
        ("az://container/a.pdf", "adlfs", "azure"),
        ("abfs://container/a.pdf", "adlfs", "azure"),
        ("abfss://container/a.pdf", "adlfs", "azure"),
    ],
)
def test_each_scheme_goes_to_its_fsspec_library_or_names_its_extra(
    url: str, library: str, extra: str, monkeypatch
) -> None:
    """Routing only (gs:// and az:// end to end: test_cloud_buckets.py)."""
    if importlib.util.find_spec(library) is None:
        with pytest.raises(remote.StorageUsageError) as caught:
            remote.filesystem(url)
        scheme = url.split("://", 1)[0]
        assert str(caught.value) == (
            f"{url}: {scheme}:// needs the {extra} extra: pip install 'hpdparse[{extra}]'"
        )
        return
    account = "DefaultEndpointsProtocol=https;AccountName=a;AccountKey=a2V5;EndpointSuffix=x"
    monkeypatch.setenv("AZURE_STORAGE_CONNECTION_STRING", account)  # adlfs needs an account
    fs, _ = remote.filesystem(url)
    assert type(fs).__module__.split(".")[0] == library


def test_azure_without_an_account_is_one_line(monkeypatch) -> None:
    adlfs = pytest.importorskip("adlfs")
    adlfs.AzureBlobFileSystem.clear_instance_cache()  # fsspec's, keyed on the arguments alone
    for name in ("CONNECTION_STRING", "ACCOUNT_NAME", "ACCOUNT_KEY", "SAS_TOKEN"):
        monkeypatch.delenv(f"AZURE_STORAGE_{name}", raising=False)
    with pytest.raises(remote.StorageOpenError) as caught:
        remote.filesystem("az://docs/in/")
    assert caught.value.filename == "az://docs/in/"
    assert caught.value.strerror.startswith("no credentials (set AZURE_STORAGE_CONNECTION_STRING")
    adlfs.AzureBlobFileSystem.clear_instance_cache()
    monkeypatch.setenv("AZURE_STORAGE_CONNECTION_STRING", "not a connection string")
    with pytest.raises(remote.StorageOpenError) as caught:
        remote.filesystem("az://docs/in/")
    assert caught.value.strerror.startswith("cannot open the Azure account: ")
    assert "\n" not in caught.value.strerror


def test_gs_uses_gcsfs_json_api_file_system(monkeypatch) -> None:
    """Not gcsfs's experimental default, which asks a gRPC API about every bucket first."""
    pytest.importorskip("gcsfs")
    monkeypatch.delenv(remote.GCSFS_EXPERIMENTAL_ENV, raising=False)
    fs, path = remote.filesystem("gs://bucket/in/a.pdf")
    assert (type(fs).__module__, type(fs).__name__, path) == (
        "gcsfs.core",
        "GCSFileSystem",
        "bucket/in/a.pdf",
    )
