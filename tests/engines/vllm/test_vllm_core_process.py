"""The vllm engine with vLLM's engine core in a process of its own (``engine_core=process``).

- The text is the one the in-process engine core gives (fork mode with P-MTP), and the children
  still hit the prefix cache as much.
- A page's tiles cross to the engine core once: the children pass a shared-memory handle.
- No engine-core process outlives a conversion whose main process gets Ctrl-C (SIGINT), SIGTERM
  or SIGKILL: the real CLI in a subprocess, killed mid-run, every process it started waited for
  (a bounded wait, part of what is checked). The three conversions run side by side.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers.paths import REPO
from tests.helpers.patience import PATIENCE_SECONDS
from tests.helpers.pdfs import make_pdf
from tests.helpers.vllm import TINY, sample_pages, vllm_config, vllm_options

pytest.importorskip("vllm")
psutil = pytest.importorskip("psutil")

from hpdparse.engines.base import PageRequest  # noqa: E402
from hpdparse.engines.vllm.engine import VllmEngine  # noqa: E402

pytestmark = pytest.mark.vllm

# How long an engine core may outlive its parent: the watch polls every 0.5 s, then vLLM's
# shutdown takes a few seconds.
ORPHAN_SECONDS = 30


def _run(engine: VllmEngine, pages: list) -> list:
    prepare = engine.preparer()
    requests = [PageRequest(key=key, payload=prepare(image)) for key, image in pages]
    return sorted(engine.run(iter(requests), 8), key=lambda r: r.key)


def _texts_and_hits(results: list) -> tuple[list[str], int]:
    return [r.text for r in results], sum(r.stats["cached_tokens"] for r in results)


@pytest.mark.slow
def test_the_text_and_prefix_cache_hits_are_the_in_process_ones(vllm_engines) -> None:
    """Fork mode with P-MTP: the children's requests and the drafts cross the process boundary
    in one engine (an engine-core start costs a vLLM import and a model load). Plain mode sends
    the same parent requests with nothing more to cross over."""
    pages = sample_pages()
    config = vllm_config(TINY, fork=True)
    config.mtp = True
    inline = vllm_engines.get(config)
    expected = _texts_and_hits(_run(inline, pages))
    with VllmEngine(config, vllm_options(engine_core="process")) as engine:
        client = engine.llm_engine.engine_core
        assert not hasattr(client, "engine_core"), "the engine core runs in this process"
        sent = _count_shared_tensors(client)
        assert _texts_and_hits(_run(engine, pages)) == expected
    assert expected[1] > 0
    # Every request (parent and children) passes the tiles as a handle; only the parents'
    # tensors were new to shared memory.
    assert sent["handles"] > sent["new"] >= 1
    assert sent["new"] <= len(pages) * 2


def _count_shared_tensors(client) -> dict[str, int]:
    """Count the tensors the client hands to vLLM's shared-memory transport, and how many of
    them were not in shared memory yet (a copy); fails when the transport is not in use."""
    encoder = client.encoder
    consumer = encoder.oob_tensor_consumer
    assert consumer is not None, "no shared-memory tensor transport"
    counts = {"handles": 0, "new": 0}
    send = consumer.__call__

    def counted(tensor):
        counts["handles"] += 1
        counts["new"] += not tensor.is_shared()
        return send(tensor)

    methods = {"__call__": lambda _, t: counted(t), "new_message": consumer.new_message}
    encoder.oob_tensor_consumer = type("Counted", (), methods)()
    return counts


def _convert_command(pdf: Path, out: Path) -> list[str]:
    return [
        sys.executable,
        "-m",
        "hpdparse",
        "convert",
        str(pdf),
        "-o",
        str(out),
        "--engine",
        "vllm",
        "--model",
        str(TINY),
        "--engine-option",
        "engine_core=process",
        "--engine-option",
        "kv_cache_gib=0.25",
        "--dpi",
        "72",
        "--workers",
        "1",
        "--batch-size",
        "2",
    ]


def _engine_cores(processes: list) -> list:
    cores = []
    for proc in processes:
        with contextlib.suppress(psutil.Error):
            if "EngineCore" in proc.name() + " ".join(proc.cmdline()):
                cores.append(proc)
    return cores


SIGNALS = {"ctrl-c": signal.SIGINT, "sigterm": signal.SIGTERM, "sigkill": signal.SIGKILL}


@dataclasses.dataclass
class Parent:
    """A conversion as users run it, started in a process group of its own."""

    proc: subprocess.Popen
    out: Path
    started: list = dataclasses.field(default_factory=list)
    alive: list = dataclasses.field(default_factory=list)

    @classmethod
    def start(cls, folder: Path) -> Parent:
        pdf = make_pdf(folder / "in" / "long.pdf", 300, "long")
        proc = subprocess.Popen(
            _convert_command(pdf, folder / "out"),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            cwd=REPO,
            env={**os.environ, "PYTHONPATH": str(REPO)},
            start_new_session=True,
        )
        return cls(proc, folder / "out")

    def mid_run(self) -> bool:
        """The engine core is up and a page has been written."""
        assert self.proc.poll() is None, self.proc.communicate()[1][-2000:]
        with contextlib.suppress(psutil.Error):
            self.started = psutil.Process(self.proc.pid).children(recursive=True)
        return bool(_engine_cores(self.started) and list(self.out.rglob("page-*.json")))

    def stop(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        for child in self.started:
            with contextlib.suppress(psutil.Error):
                child.kill()
        self.proc.wait()


@pytest.fixture(scope="module")
def signalled(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Parent]]:
    """One parent per signal, started together (each start imports vLLM twice: the three
    overlap instead of queueing), each sent its signal once all are mid-run; then every process
    each one started is waited for."""
    parents: dict[str, Parent] = {}
    try:
        for name in SIGNALS:
            parents[name] = Parent.start(tmp_path_factory.mktemp(name))
        deadline = time.monotonic() + PATIENCE_SECONDS
        waiting = set(parents)
        while waiting:
            assert time.monotonic() < deadline, f"the conversions did not start: {waiting}"
            time.sleep(0.2)
            waiting = {name for name in waiting if not parents[name].mid_run()}
        for name, parent in parents.items():
            assert _engine_cores(parent.started), name
            os.kill(parent.proc.pid, SIGNALS[name])  # the main process only, not its group
        for parent in parents.values():
            parent.proc.wait(ORPHAN_SECONDS)
            _, parent.alive = psutil.wait_procs(parent.started, timeout=ORPHAN_SECONDS)
        yield parents
    finally:
        for parent in parents.values():
            parent.stop()


@pytest.mark.slow
@pytest.mark.parametrize("name", list(SIGNALS))
def test_no_engine_core_outlives_its_parent(signalled: dict[str, Parent], name: str) -> None:
    parent = signalled[name]
    assert not parent.alive, f"alive {ORPHAN_SECONDS} s after the parent: {parent.alive}"
    if SIGNALS[name] != signal.SIGKILL:
        assert parent.proc.returncode == 130, parent.proc.stderr.read()[-2000:]
