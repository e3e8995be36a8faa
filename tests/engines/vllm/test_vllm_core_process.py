"""The vllm engine with vLLM's engine core in a process of its own (``engine_core=process``).

- The text is the one the in-process engine core gives (fork mode with P-MTP), and the children
  still hit the prefix cache as much.
- A page's tiles cross to the engine core once: the children pass a shared-memory handle.
- No engine-core process outlives a conversion whose main process gets Ctrl-C (SIGINT), SIGTERM
  or SIGKILL: the real CLI in a subprocess, killed mid-run, every process it started waited for
  (a bounded wait, part of what is checked).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
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

START_SECONDS = 300  # a loaded 2-core machine takes minutes to start vLLM twice
# How long an engine core may outlive its parent (once the parent has exited): the watch polls
# every 0.5 s, then vLLM's shutdown takes a few seconds.
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


@pytest.mark.slow
@pytest.mark.parametrize(
    "sig", [signal.SIGINT, signal.SIGTERM, signal.SIGKILL], ids=["ctrl-c", "sigterm", "sigkill"]
)
def test_no_engine_core_outlives_its_parent(tmp_path: Path, sig: signal.Signals) -> None:
    pdf = make_pdf(tmp_path / "in" / "long.pdf", 300, "long")
    temp = tmp_path / "temp"  # the run's temporary folder, where vLLM's sockets would stay
    temp.mkdir()
    env = {**os.environ, "PYTHONPATH": str(REPO), "TMPDIR": str(temp)}
    proc = subprocess.Popen(
        _convert_command(pdf, tmp_path / "out"),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        cwd=REPO,
        env=env,
        start_new_session=True,
    )
    started: list = []
    try:
        main = psutil.Process(proc.pid)
        deadline = time.monotonic() + START_SECONDS
        # Mid-run: the engine core is up and a page has been written.
        while not (_engine_cores(started) and list((tmp_path / "out").rglob("page-*.json"))):
            assert proc.poll() is None, proc.communicate()[1][-2000:]
            assert time.monotonic() < deadline, "the conversion did not start"
            time.sleep(0.2)
            started = main.children(recursive=True)
        started = main.children(recursive=True)
        assert _engine_cores(started)
        os.kill(proc.pid, sig)  # the main process only, not its process group
        # How long the main process takes to shut vLLM down depends on how busy the machine
        # is; what is checked is that nothing it started outlives it.
        proc.wait(PATIENCE_SECONDS)
        _, alive = psutil.wait_procs(started, timeout=ORPHAN_SECONDS)
        assert not alive, f"alive {ORPHAN_SECONDS} s after the parent: {alive}"
        if sig != signal.SIGKILL:
            assert proc.returncode == 130, proc.stderr.read()[-2000:]
            # A run that ends by itself leaves none of vLLM's ZeroMQ socket files behind.
            assert not [p for p in temp.rglob("*") if p.is_socket()]
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        for child in started:
            with contextlib.suppress(psutil.Error):
                child.kill()
        proc.wait()
