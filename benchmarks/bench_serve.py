"""`hpdparse serve` under load on the tiny checkpoint: pages/s and latency as clients see them.

    .venv/bin/python benchmarks/bench_serve.py [--engine vllm|torch] [--clients 16]
        [--pages-each 8] [--streamed 0.5] [--max-queued 32] [--dpi 200]

Starts a real server (a subprocess), then --clients threads each send --pages-each sample pages
one after the other with the official openai client (a --streamed share of them streamed), after
a warm-up page. Prints pages/s, request latency p50/p99, for streamed pages the time to the first
content p50/p99, the server's peak RSS, and the server's own page-latency histogram count.
Asserts nothing; the tiny checkpoint shows the server's overhead and scheduling, not the real
model's speed.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import openai  # noqa: E402

from tests.helpers.paths import FIXTURES, TINY  # noqa: E402
from tests.helpers.serving import page_messages, serve_process  # noqa: E402
from tests.tinymodel.synth import load_ground_truth  # noqa: E402


def _pngs(dpi: int) -> list[bytes]:
    from hpdparse.engines.openai.page_png import encode_page_png
    from hpdparse.sources.rasterize import rasterize_page
    from tests.helpers.paths import SAMPLES
    from tests.helpers.serving import INPUTS

    files = {Path(name).stem: SAMPLES / name for name in INPUTS}
    keys = sorted(load_ground_truth(FIXTURES / "streams"))
    return [encode_page_png(rasterize_page(str(files[s]), p, dpi)[0]) for s, p in keys]


def _percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


class _Clients:
    def __init__(self, api: openai.OpenAI, pngs: list[bytes], streamed: float) -> None:
        self.api, self.pngs, self.streamed = api, pngs, streamed
        self.latencies: list[float] = []
        self.first_content: list[float] = []
        self.lock = threading.Lock()
        self.counter = 0

    def page(self, number: int) -> None:
        png = self.pngs[number % len(self.pngs)]
        began = time.perf_counter()
        with self.lock:
            self.counter += 1  # every page whose count crosses a multiple of 1/streamed
            stream = int(self.counter * self.streamed) > int((self.counter - 1) * self.streamed)
        ask = self.api.chat.completions.create
        if stream:
            first = None
            for chunk in ask(model=str(TINY), messages=page_messages(png), stream=True):
                if first is None and chunk.choices and chunk.choices[0].delta.content:
                    first = time.perf_counter() - began
            with self.lock:
                self.first_content.append(first or 0.0)
        else:
            ask(model=str(TINY), messages=page_messages(png))
        with self.lock:
            self.latencies.append(time.perf_counter() - began)

    def client(self, number: int, pages: int) -> None:
        for page in range(pages):
            self.page(number * pages + page)


def _peak_rss(served, stop: threading.Event, peak: list[int]) -> None:
    while not stop.wait(0.2):
        peak[0] = max(peak[0], served.rss())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--engine", choices=("vllm", "torch"), default="vllm")
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--pages-each", type=int, default=8)
    parser.add_argument("--streamed", type=float, default=0.5, help="share of pages streamed")
    parser.add_argument("--max-queued", type=int, default=32)
    parser.add_argument("--dpi", type=int, default=200)
    args = parser.parse_args()
    pngs = _pngs(args.dpi)
    server_args = ["--engine", args.engine, "--port", "0", "--device", "cpu"]
    server_args += ["--max-queued", str(args.max_queued)]
    if args.engine == "vllm":
        server_args += ["--engine-option", "kv_cache_gib=1"]
    with tempfile.TemporaryDirectory() as tmp:
        began = time.perf_counter()
        with serve_process(server_args, Path(tmp) / "stderr.txt") as served:
            print(f"{args.engine} server up in {time.perf_counter() - began:.1f} s")
            api = openai.OpenAI(base_url=served.url, api_key="-", max_retries=0, timeout=900)
            clients = _Clients(api, pngs, args.streamed)
            clients.page(0)  # warm-up
            clients.latencies.clear()
            clients.first_content.clear()
            peak, stop = [served.rss()], threading.Event()
            sampler = threading.Thread(target=_peak_rss, args=(served, stop, peak), daemon=True)
            sampler.start()
            began = time.perf_counter()
            with concurrent.futures.ThreadPoolExecutor(args.clients) as pool:
                jobs = [
                    pool.submit(clients.client, n, args.pages_each) for n in range(args.clients)
                ]
                for job in jobs:
                    job.result()
            wall = time.perf_counter() - began
            stop.set()
            sampler.join()
            histogram = served.metrics()[("hpdparse_page_seconds_count", ())]
    pages = len(clients.latencies)
    print(
        f"{args.clients} clients x {args.pages_each} pages ({args.streamed:.0%} streamed), "
        f"{args.dpi} dpi: {pages} pages in {wall:.1f} s = {pages / wall:.2f} pages/s"
    )
    p50, p99 = (_percentile(clients.latencies, q) for q in (0.5, 0.99))
    print(
        f"latency p50 {p50:.2f} s, p99 {p99:.2f} s, mean {statistics.mean(clients.latencies):.2f} s"
    )
    if clients.first_content:
        f50, f99 = (_percentile(clients.first_content, q) for q in (0.5, 0.99))
        print(f"streamed: first content after p50 {f50:.2f} s, p99 {f99:.2f} s")
    print(f"server peak RSS {peak[0] / 2**20:.0f} MiB; server counted {histogram:.0f} pages")


if __name__ == "__main__":
    main()
