"""A real `hpdparse serve` for tests and benchmarks: a subprocess on the tiny checkpoint, the
sample pages as clients send them, and readers for its /metrics and its memory.

    with serve_process(["--engine", "torch", "--port", "0"]) as served:
        served.url                              # "http://127.0.0.1:PORT/v1"
        served.metrics()                        # {(name, (("label", "v"), ...)): value}
        served.rss()                            # the server's resident memory, bytes
        served.stop()                           # SIGTERM; the exit code
"""

from __future__ import annotations

import contextlib
import os
import queue
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from hpdparse import wire
from hpdparse.engines.openai.engine import encode_page_png
from hpdparse.hpd.protocol import instruction
from tests.helpers.paths import REPO, SAMPLES, TINY
from tests.helpers.patience import PATIENCE_SECONDS
from tests.helpers.processes import stop_process

START_TIMEOUT = PATIENCE_SECONDS  # a vLLM start on a busy 2-core machine
INPUTS = ("report.pdf", "paper.pdf", "memo.pdf", "scan.png")

MetricKey = tuple[str, tuple[tuple[str, str], ...]]


@dataclass
class Served:
    proc: subprocess.Popen
    url: str
    stderr: Path
    transport: httpx.BaseTransport | None = None
    stdout_lines: list[str] = field(default_factory=list)

    @property
    def base(self) -> str:
        """The server's root URL (``/health`` and ``/metrics`` live there)."""
        return self.url.removesuffix("/v1")

    def client(self, **kwargs: object) -> httpx.Client:
        return httpx.Client(transport=self.transport, **kwargs)  # type: ignore[arg-type]

    def metrics(self) -> dict[MetricKey, float]:
        from prometheus_client.parser import text_string_to_metric_families

        with self.client(timeout=30) as client:
            answer = client.get(f"{self.base}/metrics")
        answer.raise_for_status()
        out: dict[MetricKey, float] = {}
        for family in text_string_to_metric_families(answer.text):
            for sample in family.samples:
                out[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
        return out

    def rss(self) -> int:
        with open(f"/proc/{self.proc.pid}/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
        raise RuntimeError("no VmRSS")

    def stop(self, timeout: float = 120) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout)


def _read_lines(stream, lines: queue.Queue) -> None:
    for line in stream:
        lines.put(line)
    lines.put(None)


@contextlib.contextmanager
def serve_process(
    args: list[str], stderr: Path, *, model: Path = TINY, uds: str | None = None
) -> Iterator[Served]:
    """`hpdparse serve --model MODEL ARGS` until the block ends (then SIGTERM, or kill); its
    document store in a folder beside `stderr` unless ARGS name one."""
    cmd = [sys.executable, "-m", "hpdparse", "serve", "--model", str(model), *args]
    if "--store" not in args:
        cmd += ["--store", str(stderr.parent / "store")]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    with open(stderr, "w", encoding="utf-8") as err:
        proc = subprocess.Popen(
            cmd, stdout=subprocess.PIPE, stderr=err, text=True, cwd=REPO, env=env
        )
    lines: queue.Queue = queue.Queue()
    threading.Thread(target=_read_lines, args=(proc.stdout, lines), daemon=True).start()
    try:
        line = lines.get(timeout=START_TIMEOUT)
        assert line and line.startswith("serving "), (line, stderr.read_text())
        url = line.strip().rsplit(" ", 1)[1].strip("()")
        transport = httpx.HTTPTransport(uds=uds) if uds else None
        yield Served(proc, url, stderr, transport)
    finally:
        stop_process(proc)


def sample_pngs(keys: list[tuple[str, int]]) -> dict[tuple[str, int], bytes]:
    """Each sample page as `convert --engine openai` sends it: 200 dpi, PNG."""
    from hpdparse.sources.rasterize import rasterize_page

    files = {Path(name).stem: SAMPLES / name for name in INPUTS}
    return {
        (stem, page): encode_page_png(rasterize_page(str(files[stem]), page, 200)[0])
        for stem, page in keys
    }


def page_messages(png: bytes, mime: str = "image/png") -> list[dict]:
    """The messages of a page request, for the openai client."""
    return wire.chat_request("", wire.image_data_url(png, mime), instruction(True))["messages"]


def page_body(png: bytes, model: Path = TINY, **fields: object) -> dict:
    """A whole chat-completions body for one page."""
    body = wire.chat_request(str(model), wire.image_data_url(png), instruction(True))
    return {**body, **fields}
