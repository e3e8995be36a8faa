"""Shared test fixtures (paths and helpers live in tests/helpers/)."""

from __future__ import annotations

import csv
import os
import signal
from pathlib import Path

import pytest

from tests.helpers.paths import CORPUS

# OpenMP threads (torch's and vLLM's CPU kernels) sleep between parallel regions instead of
# spinning: the tests share two cores with a second test stream, and spinning threads waiting at
# a barrier for a thread that is not scheduled made the torch decoding tests 20-30x slower there
# (a vLLM engine started in this process leaves torch with two OpenMP threads). Read when torch
# loads libgomp, so set before any test module imports torch; subprocesses inherit it.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
# This machine is no Google Compute Engine VM: without this, google-auth (gcsfs's credentials)
# first asks for the VM's metadata server, 3 tries of 3 s each, wherever a test opens a gs://
# file system with no credentials of its own. Read when google.auth loads; subprocesses inherit it.
os.environ.setdefault("NO_GCE_CHECK", "true")
# A test run started in the background by a script (`pytest ... &`: a shell without job control)
# inherits SIGINT ignored, and so does every command it starts: Python installs no Ctrl-C
# handler in a process that starts with SIGINT ignored, so the tests that interrupt the CLI
# with SIGINT saw it run to the end (exit 0, not 130). Those tests send Ctrl-C as a terminal
# would: the commands they start get the default handling (a handled signal is reset to the
# default at exec; an ignored one would stay ignored).
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


@pytest.fixture(scope="session")
def corpus_dir() -> Path:
    """The shared real-world PDF corpus; tests using it skip when it is absent."""
    if not (CORPUS / "MANIFEST.tsv").is_file():
        pytest.skip(f"shared corpus not found at {CORPUS}")
    return CORPUS


@pytest.fixture(scope="session")
def corpus_manifest(corpus_dir: Path) -> list[dict[str, str]]:
    with open(corpus_dir / "MANIFEST.tsv", newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f, delimiter="\t"))


@pytest.fixture(scope="module")
def server():
    """A fake HPD server (a real local HTTP peer) shared by the tests of one module."""
    from tests.helpers.fakeserver import FakeHPDServer

    with FakeHPDServer() as srv:
        yield srv


@pytest.fixture
def srv(server):
    """The module's fake HPD server with its log cleared and no fault or delay set."""
    server.clear_log()
    server.fault = None
    server.delay = 0.0
    return server


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--screenshots",
        default=None,
        metavar="DIR",
        help="Save the review pages' browser screenshots in DIR (default: pytest's tmp folder).",
    )
