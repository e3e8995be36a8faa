"""Host memory of the vLLM engine with many pages in flight: admission control on vs off.

    .venv/bin/python benchmarks/bench_vllm_memory.py [--model tests/fixtures/tiny-hpd]
        [--pages 300] [--max-in-flight 512] [--kv-cache-gib 0.02] [--dpi 200] [--warmup 32]

Runs the same pages twice, each in its own process (peak RSS is per process): with the engine's
admission control (default max_waiting) and without it (VllmOptions.max_waiting = None,
the engine before admission control: up to max_in_flight pages queued in vLLM). Every page gets
a distinct image (two pixels changed), so pages share no prefix blocks. The KV cache is made small
(--kv-cache-gib) so that, as with the 1B model on a GPU, vLLM can run only part of the pages.

Per mode it prints: pages/s; the peak number of pages inside vLLM and of pages holding image
tiles there (sampled whenever the engine pulls a page or returns one); peak running requests;
the peak bytes of tile tensors held by vLLM's requests (distinct tensors, measured); RSS growth
over the run (the peak of the sampled RSS, and ru_maxrss, minus RSS before the run); and, clearly
labelled, the tile bytes those peak pages would hold with the 1B model's tiles at 200 dpi A4
(25 tiles of 448 x 448 x 3 uint8, 15.1 MB a page). The tiny checkpoint's own tiles are 112 px
(up to 5 a page, one channel for a grey page), ~200 times smaller, so its RSS shows the engine's
own per-page overhead rather than the tiles'. A short warm-up run (--warmup pages) comes first,
so that the RSS figures leave out what the engine allocates once on its first steps. Asserts
nothing.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

from bench_vllm import sample_images  # noqa: E402

from hpdparse.engines.base import EngineConfig, PageRequest  # noqa: E402
from hpdparse.engines.vllm.engine import VllmEngine  # noqa: E402
from hpdparse.engines.vllm.options import VllmOptions  # noqa: E402

FULL_PAGE_TILE_BYTES = 25 * 448 * 448 * 3  # the 1B model at 200 dpi A4, RGB


def rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def tiles_held_by_vllm(scheduler) -> tuple[int, int, int]:
    """(pages in vLLM, pages whose requests hold tile tensors, distinct tile tensor bytes)."""
    import torch

    pages, holding, seen, total = set(), set(), set(), 0
    for request_id, request in list(scheduler.requests.items()):
        page = request_id.split(".")[0].split("-")[0]  # "page7.c2-<suffix>" -> "page7"
        pages.add(page)
        for feature in request.mm_features or ():
            if feature.data is None:
                continue
            for elem in feature.data.values():
                tensor = elem.data
                if isinstance(tensor, torch.Tensor) and tensor.dtype == torch.uint8:
                    holding.add(page)
                    key = (tensor.untyped_storage().data_ptr(), tensor.nbytes)
                    if key not in seen:
                        seen.add(key)
                        total += tensor.nbytes
    return len(pages), len(holding), total


def run_mode(args: argparse.Namespace) -> dict:
    import torch

    torch.set_num_threads(1)
    options = VllmOptions(kv_cache_gib=args.kv_cache_gib)
    if args.mode == "off":
        options.max_waiting = None
    config = EngineConfig(
        model=args.model,
        fork=True,
        mtp=False,
        device="cpu",
        max_tokens=args.max_tokens,
        max_model_len=4096,
    )
    engine = VllmEngine(config, options)
    engine.start()
    scheduler = engine.llm_engine.engine_core.engine_core.scheduler
    prepare = engine.preparer()
    payloads = [prepare(image) for image in sample_images(args.dpi)]
    peak = {"in_vllm": 0, "holding": 0, "bytes": 0, "running": 0, "rss": 0}

    def sample() -> None:
        in_vllm, holding, nbytes = tiles_held_by_vllm(scheduler)
        running, _ = scheduler.get_request_counts()
        peak["in_vllm"] = max(peak["in_vllm"], in_vllm)
        peak["holding"] = max(peak["holding"], holding)
        peak["bytes"] = max(peak["bytes"], nbytes)
        peak["running"] = max(peak["running"], running)
        peak["rss"] = max(peak["rss"], rss_bytes())

    def requests(first: int, count: int, measure: bool):
        for n in range(first, first + count):
            if measure:
                sample()
            payload = payloads[n % len(payloads)].copy()
            payload[0, 0, 0, 0], payload[0, 0, 1, 0] = n % 256, n // 256 % 256
            yield PageRequest(n, payload)
        if measure:
            sample()  # the last page pulled

    for _ in engine.run(requests(args.pages, args.warmup, False), args.max_in_flight):
        pass
    gc.collect()
    rss_before = rss_bytes()
    began = time.perf_counter()
    done = 0
    for result in engine.run(requests(0, args.pages, True), args.max_in_flight):
        sample()
        done += result.ok
    seconds = time.perf_counter() - began
    max_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    tile_bytes = sum(p.nbytes for p in payloads) / len(payloads)
    engine.close()
    return {
        "mode": args.mode,
        "pages_ok": done,
        "seconds": seconds,
        "peak_pages_in_vllm": peak["in_vllm"],
        "peak_pages_holding_tiles": peak["holding"],
        "peak_tile_bytes": peak["bytes"],
        "peak_running_requests": peak["running"],
        "tile_bytes_per_page": tile_bytes,
        "rss_growth": peak["rss"] - rss_before,
        "maxrss_growth": max_rss - rss_before,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=str(REPO / "tests" / "fixtures" / "tiny-hpd"))
    parser.add_argument("--pages", type=int, default=300)
    parser.add_argument("--max-in-flight", type=int, default=512)
    parser.add_argument("--kv-cache-gib", type=float, default=0.02)
    parser.add_argument("--max-tokens", type=int, default=400)
    parser.add_argument("--dpi", type=int, default=200)
    parser.add_argument("--warmup", type=int, default=32)
    parser.add_argument("--mode", choices=["on", "off"], help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.mode:  # one measured run, in this process
        print(json.dumps(run_mode(args)))
        return

    print(
        f"{args.pages} pages, max_in_flight {args.max_in_flight}, KV cache {args.kv_cache_gib} "
        f"GiB, model {args.model}, {args.dpi} dpi (admission: max_waiting "
        f"{VllmOptions().max_waiting}; off: max_waiting None)"
    )
    rows = []
    for mode in ("on", "off"):
        command = [sys.executable, __file__, *sys.argv[1:], "--mode", mode]
        env = {**os.environ, "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1")}
        out = subprocess.run(command, capture_output=True, text=True, env=env)
        if out.returncode != 0:
            print(f"admission {mode}: failed\n{out.stderr[-2000:]}")
            continue
        rows.append(json.loads(out.stdout.strip().splitlines()[-1]))
    mb = 1e6
    header = (
        f"{'admission':>9} {'pages/s':>8} {'in vLLM':>8} {'w/ tiles':>8} {'running':>8} "
        f"{'tiles MB':>9} {'RSS +MB':>8} {'maxrss +MB':>10} {'1B tiles GB*':>12}"
    )
    print(header)
    for row in rows:
        print(
            f"{row['mode']:>9} {row['pages_ok'] / row['seconds']:8.1f} "
            f"{row['peak_pages_in_vllm']:8d} {row['peak_pages_holding_tiles']:8d} "
            f"{row['peak_running_requests']:8d} {row['peak_tile_bytes'] / mb:9.2f} "
            f"{row['rss_growth'] / mb:8.1f} {row['maxrss_growth'] / mb:10.1f} "
            f"{row['peak_pages_holding_tiles'] * FULL_PAGE_TILE_BYTES / 1e9:12.2f}"
        )
    if rows:
        print(
            f"in vLLM / w/ tiles: peak pages inside vLLM / holding tile tensors; running: peak "
            f"running requests; tiles MB: peak distinct tile bytes held by vLLM's requests "
            f"(tiny model, {rows[0]['tile_bytes_per_page'] / 1e3:.0f} kB a page); RSS +MB / "
            f"maxrss +MB: peak sampled RSS / ru_maxrss minus RSS before the run (after a "
            f"{args.warmup}-page warm-up).\n* extrapolated, not measured: peak pages holding "
            f"tiles x {FULL_PAGE_TILE_BYTES / mb:.1f} MB, the 1B model's tiles at 200 dpi A4."
        )


if __name__ == "__main__":
    main()
