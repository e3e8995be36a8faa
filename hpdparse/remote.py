"""Inputs and outputs given as URLs (s3://, gs://, az://, https://...), through fsspec: which
strings are URLs, the file system of a URL with the run's storage options, and the one-line
message of a storage error.

Storage options (`--storage-option KEY=VALUE`) are passed to every URL's fsspec file system. They
live in this process and, for the processes it starts (rasterizer workers, the actors of a local
Ray cluster), in the environment variable `STORAGE_OPTIONS_ENV`: never in a file, the report or a
message. Credentials otherwise come from each cloud's own chain (AWS environment variables and
profiles, `AWS_ENDPOINT_URL` for S3-compatible stores, GCP application-default credentials...).

Retries: s3:// requests are retried by botocore alone ("standard" mode: `S3_MAX_ATTEMPTS`
attempts in all, exponential backoff with jitter up to 20 s, for connection errors, timeouts,
throttling and 5xx answers); s3fs's own retry loop around each call is set to one attempt, so
that a store that is down fails a request in about 15 s rather than minutes. Both can be changed
with --storage-option (`config_kwargs={"retries": {...}}`, `retries=N`). Other schemes have
their own library's retries.
"""

from __future__ import annotations

import errno
import json
import os
import re
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from hpdparse.errors import HpdparseError

if TYPE_CHECKING:
    from fsspec import AbstractFileSystem

STORAGE_OPTIONS_ENV = "HPDPARSE_STORAGE_OPTIONS"

S3_MAX_ATTEMPTS = 5

S3_CONNECT_TIMEOUT_S = 10

S3_READ_TIMEOUT_S = 60

GCSFS_EXPERIMENTAL_ENV = "GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT"

_URL = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")

# The extra that brings each scheme's fsspec implementation (pyproject.toml).
_EXTRAS = (
    dict.fromkeys(("s3", "s3a"), "s3")
    | dict.fromkeys(("gs", "gcs"), "gcs")
    | dict.fromkeys(("az", "abfs", "abfss", "adl"), "azure")
    | dict.fromkeys(("http", "https"), "http")
)

# A storage option's value: JSON (what `--storage-option KEY=VALUE` reads, and what the processes
# this one starts get in STORAGE_OPTIONS_ENV), handed to fsspec as a keyword argument.
OptionValue = str | int | float | bool | None | list["OptionValue"] | dict[str, "OptionValue"]

_options: dict[str, OptionValue] | None = None


class StorageUsageError(HpdparseError):
    """A URL that cannot be used at all (unknown scheme, missing extra): a usage error."""


class StorageOpenError(OSError):
    """The file system of a URL cannot be opened (no account or credentials for it): `strerror`
    says why in one line, `filename` is the URL."""


def is_url(text: str | os.PathLike[str]) -> bool:
    """True when `text` is a URL with a scheme (s3://bucket/key), not a local path."""
    return isinstance(text, str) and bool(_URL.match(text)) and not text.startswith("file://")


def local_path_of(text: str) -> str:
    """A file:// URL as a plain path; anything else as it is."""
    return text[len("file://") :] if text.startswith("file://") else text


def output_location(location: str | os.PathLike[str]) -> str | Path:
    """An output folder or file as given: a URL stays text, anything else is a local Path."""
    if isinstance(location, str) and is_url(location):
        return location
    return Path(local_path_of(str(location)))


def scheme_of(url: str) -> str:
    return url.split("://", 1)[0].lower()


def parse_storage_options(items: tuple[str, ...] | list[str]) -> dict[str, OptionValue]:
    """`KEY=VALUE` pairs as a dict; VALUE is read as JSON when it parses, else as text.
    ValueError names the item (never its value: it may be a secret)."""
    options: dict[str, OptionValue] = {}
    for item in items:
        key, sep, text = item.partition("=")
        if not sep or not key.strip():
            raise ValueError(f"--storage-option {key.strip() or '?'}: not KEY=VALUE")
        try:
            options[key.strip()] = json.loads(text)
        except ValueError:
            options[key.strip()] = text
    return options


def set_storage_options(options: Mapping[str, OptionValue]) -> None:
    """Use `options` for every URL of this process and of the processes it starts."""
    global _options
    _options = dict(options)
    if options:
        os.environ[STORAGE_OPTIONS_ENV] = json.dumps(options)
    else:
        os.environ.pop(STORAGE_OPTIONS_ENV, None)


def storage_options() -> dict[str, OptionValue]:
    """The run's storage options (set here or inherited from the process that started this)."""
    global _options
    if _options is None:
        text = os.environ.get(STORAGE_OPTIONS_ENV)
        try:
            _options = dict(json.loads(text)) if text else {}
        except (ValueError, TypeError):
            _options = {}
    return dict(_options)


def _scheme_defaults(scheme: str) -> dict[str, OptionValue]:
    if _EXTRAS.get(scheme) == "s3":
        return {
            # Listings are never cached: other processes (workers, Ray actors) write there too.
            "use_listings_cache": False,
            # A whole-object read is one GET (more would first ask the size: one HEAD more).
            "max_concurrency": 1,
            "retries": 1,  # s3fs's loop; botocore retries (below)
            "config_kwargs": {
                "retries": {"max_attempts": S3_MAX_ATTEMPTS, "mode": "standard"},
                "connect_timeout": S3_CONNECT_TIMEOUT_S,
                "read_timeout": S3_READ_TIMEOUT_S,
            },
        }
    if _EXTRAS.get(scheme) in ("gcs", "azure"):
        return {"use_listings_cache": False}
    return {}


def filesystem(url: str) -> tuple[AbstractFileSystem, str]:
    """The fsspec file system of `url` and the path inside it. StorageUsageError (one line) for
    an unknown scheme or a scheme whose extra is not installed."""
    import fsspec
    from fsspec.core import url_to_fs

    scheme = scheme_of(url)
    try:
        fsspec.get_filesystem_class(scheme)
    except ValueError:
        raise StorageUsageError(
            f"{redact(url)}: unknown URL scheme {scheme}:// (use a local path, s3://, gs://, "
            "az:// or https://)",
            path=redact(url),
        ) from None
    except ImportError:
        raise _needs_extra(url, scheme) from None
    options = _scheme_defaults(scheme)
    user = storage_options()
    if "config_kwargs" in user and "config_kwargs" in options:
        user["config_kwargs"] = {**options["config_kwargs"], **user["config_kwargs"]}
    options.update(user)
    retries = options.pop("retries", None)  # an attribute of s3fs's file system, not an argument
    try:
        experimental = os.environ.get(GCSFS_EXPERIMENTAL_ENV, "").lower() in ("true", "1")
        if _EXTRAS.get(scheme) == "gcs" and not experimental:
            fs, path = _plain_gcsfs(url, options)
        else:
            fs, path = url_to_fs(url, **options)
    except ImportError as exc:
        raise _needs_extra(url, scheme, f" ({exc.__class__.__name__})") from None
    except Exception as exc:  # the library refused to open: no account, a bad option...
        raise StorageOpenError(errno.EIO, redact(_open_reason(scheme, exc)), redact(url)) from None
    if retries is not None and hasattr(fs, "retries"):
        fs.retries = int(retries)
    return fs, path


def _needs_extra(url: str, scheme: str, detail: str = "") -> StorageUsageError:
    extra = _EXTRAS.get(scheme, scheme)
    return StorageUsageError(
        f"{redact(url)}: {scheme}:// needs the {extra} extra: pip install 'hpdparse[{extra}]'"
        + detail,
        path=redact(url),
    )


def _open_reason(scheme: str, exc: BaseException) -> str:
    if _EXTRAS.get(scheme) != "azure":
        return storage_reason(exc)
    # adlfs: "unable to connect to account for <the Azure SDK's reason>"
    text = _first_line(str(exc)).removeprefix("unable to connect to account for ").strip()
    if "account_name" in text:
        return (
            "no credentials (set AZURE_STORAGE_CONNECTION_STRING, or AZURE_STORAGE_ACCOUNT_NAME "
            "and AZURE_STORAGE_ACCOUNT_KEY, or --storage-option account_name=... "
            "--storage-option account_key=...)"
        )
    return f"cannot open the Azure account: {text}"


def _plain_gcsfs(url: str, options: dict[str, OptionValue]) -> tuple[AbstractFileSystem, str]:
    """gcsfs's JSON-API file system. gcsfs's default class (its experimental zonal and
    hierarchical-bucket support) asks the storage-control gRPC API for a bucket's layout before
    its requests; where that answer is refused (no permission for it, an emulator, a
    GCS-compatible store) it logs a warning and asks again at every request, or waits out a 60 s
    timeout each time. hpdparse reads and writes whole objects, which the JSON API does alone;
    GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT=true restores gcsfs's default."""
    from gcsfs.core import GCSFileSystem

    fs = GCSFileSystem(**options)
    return fs, fs._strip_protocol(url)


def join(url: str, *names: str) -> str:
    """`url` with `names` appended, "/"-separated."""
    return "/".join([url.rstrip("/"), *(n.strip("/") for n in names if n)])


def redact(text: str) -> str:
    """`text` without the credentials it could carry: user:password@ in URLs and the values of
    the storage options and of the AWS secret variables. An Azure URL's `container@account` is
    a name, not a credential, and stays."""
    text = _USERINFO.sub(_without_userinfo, text)
    secrets = [v for v in _secret_values() if len(v) >= 4]
    for secret in sorted(secrets, key=len, reverse=True):
        text = text.replace(secret, "***")
    return text


_USERINFO = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*)(://)([^/@\s]+)@")
_CONTAINER_AT_ACCOUNT = frozenset({"az", "abfs", "abfss"})


def _without_userinfo(match: re.Match[str]) -> str:
    scheme, separator, userinfo = match.group(1, 2, 3)
    if scheme.lower() in _CONTAINER_AT_ACCOUNT and ":" not in userinfo:
        return match.group(0)
    return scheme + separator


def _secret_values() -> list[str]:
    values = list(_strings(storage_options()))
    values += [os.environ[name] for name in _SECRET_ENV if os.environ.get(name)]
    for text in list(values):  # a connection string's key, wherever it appears alone
        values += _CONNECTION_SECRET.findall(text)
    return values


def _strings(value: OptionValue) -> Iterator[str]:
    """The strings in a storage option's value, however deep."""
    if isinstance(value, dict):
        value = list(value.values())
    if isinstance(value, (list, tuple)):
        for item in value:
            yield from _strings(item)
    elif isinstance(value, str):
        yield value


# The secrets each cloud's chain reads from the environment (botocore, adlfs, the Azure SDK).
_SECRET_ENV = (
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "AZURE_STORAGE_KEY",
    "AZURE_STORAGE_ACCOUNT_KEY",
    "AZURE_STORAGE_CONNECTION_STRING",
    "AZURE_STORAGE_SAS_TOKEN",
    "AZURE_STORAGE_CLIENT_SECRET",
    "AZURE_CLIENT_SECRET",
)

_CONNECTION_SECRET = re.compile(r"(?:AccountKey|SharedAccessSignature)=([^;]+)", re.IGNORECASE)


def storage_reason(exc: BaseException) -> str:
    """What went wrong with a storage request, in a few words (no secrets)."""
    name = exc.__class__.__name__
    text = _first_line(str(exc))
    azure_code = getattr(exc, "error_code", None)  # azure-core's HttpResponseError
    if azure_code == "ContainerNotFound":
        return "container not found"
    if isinstance(exc, FileNotFoundError) or name == "ResourceNotFoundError":
        detail = getattr(exc, "strerror", None) or text
        return "bucket not found" if "bucket does not exist" in detail.lower() else "not found"
    if isinstance(exc, PermissionError) or name == "ClientAuthenticationError":
        return f"access denied ({text})" if text else "access denied"
    if name in ("NoCredentialsError", "PartialCredentialsError", "CredentialRetrievalError"):
        return (
            "no credentials (set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, a profile, or "
            "--storage-option key=... --storage-option secret=...)"
        )
    if name in (
        "EndpointConnectionError",
        "ClientConnectorError",
        "ConnectionRefusedError",
        "ServiceRequestError",  # azure-core: the request never reached the store
    ):
        return f"cannot reach the store ({text or name})"
    if name in ("ConnectTimeoutError", "ReadTimeoutError", "TimeoutError", "FSTimeoutError"):
        return f"the store did not answer in time ({text or name})"
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    return f"{name}: {text}" if text else name


def _first_line(text: str) -> str:
    """The first line of an error's text, blanks collapsed: the Azure SDK appends request ids,
    times and the XML body on the lines after it."""
    lines = [line for line in text.splitlines() if line.strip()]
    return " ".join(lines[0].split()) if lines else ""


def missing_bucket_reason(url: str) -> str:
    """Why writing an object at `url` found nothing there: only its bucket can be missing."""
    return "container not found" if _EXTRAS.get(scheme_of(url)) == "azure" else "bucket not found"


def storage_message(url: str, exc: BaseException) -> str:
    """The one-line message of a storage error about `url`."""
    return redact(f"{url}: {storage_reason(exc)}")
