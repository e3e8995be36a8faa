"""The vLLM engine at the real model's size: the real-size instrument (benchmarks/instrument.py)
decoding distinct pages in plain, fork and fork + P-MTP mode.

    python benchmarks/bench_instrument.py [--model DIR | --blocks 24 --tokens-per-page 1770
        --pmtp-rate 0.7 --reduced] [--modes plain,fork,fork+pmtp] [--batch-sizes 1,8]
        [--pages 8] [--tiles 25] [--device cpu|cuda] [--max-model-len 16384]
        [--deadline SECONDS] [--json FILE]

Without --model the instrument is generated into a temporary folder (about 2.1 GB; removed at
the end). Every page is --tiles distinct random grey 448x448 tiles (25: an A4 page at 200 dpi,
6,400 image tokens), so no page hits another's prefix cache. Per mode: the engine's start-up
time; per batch size (pages in flight; at least that many pages are decoded): pages/s, output
tokens/s, decoding steps per page, milliseconds per decoding step (wall time / steps, the cost
of one step of the whole batch), P-MTP acceptance, and how many pages gave the instrument's
expected text. --deadline stops before a row that would start after that many seconds (rows
left out are listed). Peak memory: the process's RSS and, on CUDA, torch's peak allocation.
Asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

from bench_vllm import timed_run  # noqa: E402

from hpdparse.engines.base import EngineConfig  # noqa: E402
from hpdparse.engines.vllm.options import VllmOptions  # noqa: E402

MODES = {"plain": (False, False), "fork": (True, False), "fork+pmtp": (True, True)}
MODES |= {"plain+pmtp": (False, True)}


def page_tiles(count: int, tiles: int, tile: int = 448) -> list:
    """`count` distinct pages of random grey tiles, uint8 (tiles, tile, tile, 1)."""
    import numpy as np

    return [
        np.random.default_rng(i).integers(0, 256, (tiles, tile, tile, 1), dtype=np.uint8)
        for i in range(count)
    ]


def run_row(engine, payloads: list, batch: int, expected: str) -> dict:
    results, figures = timed_run(engine, payloads, batch)
    seconds = figures["seconds"]
    n = len(results)
    tokens = sum(r.output_tokens for r in results)
    steps = sum(r.stats.get("decoding_steps", 0) for r in results)
    drafted = sum(r.stats.get("drafted_tokens", 0) for r in results)
    accepted = sum(r.stats.get("accepted_tokens", 0) for r in results)
    # Engine steps are shared by the pages in flight: wall time per step of the longest page.
    longest = max(r.stats.get("decoding_steps", 0) for r in results)
    return {
        "batch": batch,
        "pages": n,
        "seconds": round(seconds, 2),
        "pages_per_s": round(n / seconds, 3),
        "tokens_per_s": round(tokens / seconds, 1),
        "steps_per_page": round(steps / n, 1),
        "ms_per_step": round(1000 * seconds / max(1, longest * -(-n // batch)), 2),
        "tokens_per_page": round(tokens / n, 1),
        "forks_per_page": round(sum(r.stats.get("forks", 0) for r in results) / n, 2),
        "acceptance": round(accepted / drafted, 3) if drafted else None,
        "expected_text": sum(r.text == expected for r in results),
        "errors": sum(r.finish_reason == "error" for r in results),
    }


def _engine_config(
    model: Path, mode: str, device: str, max_tokens: int, max_model_len: int
) -> EngineConfig:
    fork, mtp = MODES[mode]
    return EngineConfig(
        model=str(model),
        fork=fork,
        mtp=mtp,
        device=device,
        max_tokens=max_tokens,
        max_model_len=max_model_len,
    )


def _peak_memory() -> dict:
    peak = {"rss_gib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20, 2)}
    try:
        import torch

        if torch.cuda.is_available():
            peak["cuda_max_allocated_gib"] = round(torch.cuda.max_memory_allocated() / 2**30, 2)
    except ImportError:  # pragma: no cover
        pass
    return peak


def bench(args: argparse.Namespace, model: Path) -> dict:
    from hpdparse.engines.vllm.engine import VllmEngine

    expected = (model / "expected.txt").read_text(encoding="utf-8")
    batches = [int(b) for b in args.batch_sizes.split(",")]
    payloads = page_tiles(max(args.pages, *batches), args.tiles)
    report: dict = {"model": str(model), "tiles": args.tiles, "modes": {}, "left_out": []}
    began = time.perf_counter()
    header = f"{'mode':10} {'batch':>5} {'pages':>5} {'pages/s':>8} {'tok/s':>8} {'steps/pg':>8} "
    header += f"{'ms/step':>8} {'accept':>7} {'expected':>8}"
    for mode in args.modes.split(","):
        if args.deadline and time.perf_counter() - began > args.deadline:
            report["left_out"] += [f"{mode} batch {b}" for b in batches]
            continue
        config = _engine_config(model, mode, args.device, args.max_tokens, args.max_model_len)
        options = VllmOptions(kv_cache_gib=2.0) if args.device == "cpu" else VllmOptions()
        with VllmEngine(config, options) as engine:
            rows = []
            print(f"\n{mode}: engine start-up {engine.startup_seconds:.1f} s\n{header}", flush=True)
            run_row(engine, payloads[:1], 1, expected)  # warm-up
            for batch in batches:
                if args.deadline and time.perf_counter() - began > args.deadline:
                    report["left_out"].append(f"{mode} batch {batch}")
                    continue
                row = run_row(engine, payloads[: max(args.pages, batch)], batch, expected)
                rows.append(row)
                accept = f"{row['acceptance']:.1%}" if row["acceptance"] is not None else "-"
                print(
                    f"{mode:10} {batch:5d} {row['pages']:5d} {row['pages_per_s']:8.3f} "
                    f"{row['tokens_per_s']:8.1f} {row['steps_per_page']:8.1f} "
                    f"{row['ms_per_step']:8.1f} {accept:>7} "
                    f"{row['expected_text']:5d}/{row['pages']}",
                    flush=True,
                )
            report["modes"][mode] = {"startup_s": round(engine.startup_seconds, 1), "rows": rows}
    report["peak_memory"] = _peak_memory()
    if report["left_out"]:
        print(f"left out (past --deadline): {', '.join(report['left_out'])}")
    print(f"peak memory: {report['peak_memory']}")
    return report


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", type=Path, help="an instrument folder (default: make one)")
    parser.add_argument("--blocks", type=int, default=24)
    parser.add_argument("--tokens-per-page", type=int, default=1770)
    parser.add_argument("--pmtp-rate", type=float, default=0.7)
    parser.add_argument("--reduced", action="store_true")
    parser.add_argument("--modes", default="plain,fork,fork+pmtp")
    parser.add_argument("--batch-sizes", default="1,8")
    parser.add_argument("--pages", type=int, default=8)
    parser.add_argument("--tiles", type=int, default=25)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--max-tokens", type=int, default=8000)
    parser.add_argument("--max-model-len", type=int, default=16384)
    parser.add_argument("--deadline", type=float, default=0.0)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    os.environ.setdefault("HPDPARSE_CACHE", tempfile.mkdtemp(prefix="hpdparse-cache-"))
    with tempfile.TemporaryDirectory(prefix="hpd-instrument-") as tmp:
        model = args.model
        if model is None:
            from instrument import Spec, write_instrument

            spec = Spec(args.blocks, args.tokens_per_page, pmtp_rate=args.pmtp_rate)
            spec.reduced = args.reduced
            began = time.perf_counter()
            model = write_instrument(Path(tmp) / "instrument", spec)
            print(f"instrument written in {time.perf_counter() - began:.1f} s", flush=True)
        report = bench(args, model)
    if args.json:
        args.json.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
