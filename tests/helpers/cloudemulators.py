"""Google Cloud Storage and Azure Blob Storage emulators on 127.0.0.1 for the object-storage
tests, each in its own process on a free port, and the clouds' official clients
(google-cloud-storage, azure-storage-blob) to put a test's inputs in a bucket and read its
outputs back, independently of fsspec and of hpdparse's store.

- GCS: `gcp-storage-emulator` (PyPI, the dev extra), the GCS JSON API. Clients find it through
  STORAGE_EMULATOR_HOST and use no credentials.
- Azure: Azurite's blob service (npm `azurite`, run by node; `.ci/install-test-tools.sh`
  installs it in `.test-tools/`), with its well-known development account. Its key is public
  (Azure's documentation prints it), yet hpdparse must treat it as the secret it stands for.

`start_gcs()` and `start_azurite()` return None, with the reason in `unavailable`, when the
emulator is not installed; they raise when it is installed but does not start.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.helpers.paths import REPO
from tests.helpers.processes import stop_process
from tests.helpers.s3server import free_port, wait_for_port

AZURITE_ACCOUNT = "devstoreaccount1"
AZURITE_KEY = (
    "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
)

AZURITE_BIN = REPO / ".test-tools" / "node_modules" / ".bin" / "azurite-blob"

unavailable: dict[str, str] = {}


@dataclass
class Emulator:
    """An emulator process, the environment hpdparse needs to reach it, and an official
    client for the test's own requests."""

    scheme: str
    proc: subprocess.Popen
    port: int
    env: dict[str, str]
    log: Any = field(repr=False)

    def stop(self) -> None:
        stop_process(self.proc, grace=10)
        self.log.close()

    def url(self, bucket: str, key: str = "") -> str:
        return f"{self.scheme}://{bucket}/{key}"

    def create_bucket(self, name: str) -> None:
        if self.scheme == "gs":
            _gcs_client(self).create_bucket(name)
        else:
            _azure_client(self).create_container(name)

    def keys(self, bucket: str, prefix: str = "") -> set[str]:
        """The keys under `prefix`, without it."""
        return {name[len(prefix) :] for name in self._names(bucket, prefix)}

    def upload(self, bucket: str, prefix: str, files: list[Path]) -> None:
        for path in files:
            self.put(bucket, f"{prefix}{path.name}", path.read_bytes())

    def put(self, bucket: str, key: str, data: bytes) -> None:
        if self.scheme == "gs":
            _gcs_client(self).bucket(bucket).blob(key).upload_from_string(data)
        else:
            _azure_client(self).get_blob_client(bucket, key).upload_blob(data, overwrite=True)

    def get(self, bucket: str, key: str) -> bytes:
        if self.scheme == "gs":
            return _gcs_client(self).bucket(bucket).blob(key).download_as_bytes()
        return _azure_client(self).get_blob_client(bucket, key).download_blob().readall()

    def delete(self, bucket: str, key: str) -> None:
        if self.scheme == "gs":
            _gcs_client(self).bucket(bucket).blob(key).delete()
        else:
            _azure_client(self).get_blob_client(bucket, key).delete_blob()

    def download_tree(self, bucket: str, prefix: str, target: Path) -> None:
        """Every object under `prefix` into `target`, keys as relative paths."""
        for name in self._names(bucket, prefix):
            dest = target / name[len(prefix) :]
            dest.parent.mkdir(parents=True, exist_ok=True)
            dest.write_bytes(self.get(bucket, name))

    def _names(self, bucket: str, prefix: str) -> list[str]:
        if self.scheme == "gs":
            return [b.name for b in _gcs_client(self).list_blobs(bucket, prefix=prefix)]
        container = _azure_client(self).get_container_client(bucket)
        return [b.name for b in container.list_blobs(name_starts_with=prefix)]


def start_gcs(log_path: Path) -> Emulator | None:
    try:
        import gcp_storage_emulator  # noqa: F401
        import google.cloud.storage  # noqa: F401
    except ImportError as exc:
        unavailable["gs"] = f"gcp-storage-emulator or google-cloud-storage missing ({exc})"
        return None
    port = free_port()
    command = [sys.executable, "-m", "gcp_storage_emulator", "start", "--in-memory"]
    command += ["-H", "127.0.0.1", "--port", str(port)]
    env = {"STORAGE_EMULATOR_HOST": f"http://127.0.0.1:{port}", "NO_GCE_CHECK": "true"}
    return _start("gs", command, port, env, log_path)


def azurite_command() -> list[str] | None:
    """How to start Azurite's blob service: $HPDPARSE_AZURITE, the copy
    .ci/install-test-tools.sh installs, or `azurite-blob` on the PATH."""
    given = os.environ.get("HPDPARSE_AZURITE")
    found = given or (str(AZURITE_BIN) if AZURITE_BIN.exists() else shutil.which("azurite-blob"))
    node = shutil.which("node") or shutil.which("nodejs")
    if not found or not Path(found).exists() or not node:
        return None
    return [node, found]


def start_azurite(log_path: Path) -> Emulator | None:
    command = azurite_command()
    if command is None:
        unavailable["az"] = "Azurite not installed (bash .ci/install-test-tools.sh)"
        return None
    try:
        import azure.storage.blob  # noqa: F401
    except ImportError as exc:
        unavailable["az"] = f"azure-storage-blob missing ({exc})"
        return None
    port = free_port()
    command += ["--blobHost", "127.0.0.1", "--blobPort", str(port), "--inMemoryPersistence"]
    command += ["--silent", "--skipApiVersionCheck", "--disableTelemetry", "--loose"]
    connection = (
        f"DefaultEndpointsProtocol=http;AccountName={AZURITE_ACCOUNT};AccountKey={AZURITE_KEY};"
        f"BlobEndpoint=http://127.0.0.1:{port}/{AZURITE_ACCOUNT};"
    )
    env = {"AZURE_STORAGE_CONNECTION_STRING": connection}
    return _start("az", command, port, env, log_path)


def _start(
    scheme: str, command: list[str], port: int, env: dict[str, str], log_path: Path
) -> Emulator:
    log = open(log_path, "wb")  # noqa: SIM115 - the emulator writes it until stop()
    proc = subprocess.Popen(
        command, stdout=log, stderr=subprocess.STDOUT, cwd=log_path.parent, env=os.environ.copy()
    )
    emulator = Emulator(scheme, proc, port, env, log)
    try:
        wait_for_port(port)
    except RuntimeError:
        emulator.stop()
        raise RuntimeError(f"{command[:2]} did not start: {log_path.read_text()[-2000:]}") from None
    return emulator


_clients: dict[int, Any] = {}


def _gcs_client(emulator: Emulator) -> Any:
    if emulator.port not in _clients:
        from google.api_core.client_options import ClientOptions
        from google.auth.credentials import AnonymousCredentials
        from google.cloud import storage

        _clients[emulator.port] = storage.Client(
            project="test",
            credentials=AnonymousCredentials(),
            client_options=ClientOptions(api_endpoint=emulator.env["STORAGE_EMULATOR_HOST"]),
        )
    return _clients[emulator.port]


def _azure_client(emulator: Emulator) -> Any:
    if emulator.port not in _clients:
        from azure.storage.blob import BlobServiceClient

        connection = emulator.env["AZURE_STORAGE_CONNECTION_STRING"]
        _clients[emulator.port] = BlobServiceClient.from_connection_string(connection)
    return _clients[emulator.port]
