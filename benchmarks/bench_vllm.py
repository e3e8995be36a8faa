"""vLLM engine throughput on the tiny checkpoint: fork vs plain (--no-fork) at several batch sizes.

    .venv/bin/python benchmarks/bench_vllm.py [--model tests/fixtures/tiny-hpd] [--pages 64]
        [--batch-sizes 1,16,64] [--max-tokens 400] [--forking-instrument]

Prints engine start-up time, then per mode and batch size: pages/s, output tokens/s, decoding
steps per page (engine steps in which the page produced a token), forks per page and the share of
child prompt tokens served from the prefix cache. Same pages (the samples, rendered at --dpi and
repeated up to --pages) for every row. --forking-instrument runs on the test suite's rewired copy
of the checkpoint that forks every 47 tokens, for when the fixture's own weights do not fork.
Asserts nothing.
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from hpdparse.engines.base import EngineConfig, PageRequest  # noqa: E402
from hpdparse.engines.vllm_engine import VllmEngine  # noqa: E402


def sample_images(dpi: int, count: int) -> list:
    import pymupdf
    from PIL import Image

    images = []
    for pdf in sorted((REPO / "samples").glob("*.pdf")):
        with pymupdf.open(pdf) as doc:
            for page in doc:
                pix = page.get_pixmap(dpi=dpi)
                images.append(Image.frombytes("RGB", (pix.width, pix.height), pix.samples))
    for png in sorted((REPO / "samples").glob("*.png")):
        images.append(Image.open(png).convert("RGB"))
    return [images[i % len(images)] for i in range(count)]


def bench(engine: VllmEngine, payloads: list, batch: int) -> dict[str, float]:
    requests = (PageRequest(i, p) for i, p in enumerate(payloads))
    began = time.perf_counter()
    results = list(engine.run(requests, batch))
    seconds = time.perf_counter() - began
    n = len(results)
    tokens = sum(r.output_tokens for r in results)
    child_prompt = sum(r.stats["child_prompt_tokens"] for r in results)
    cached = sum(r.stats["cached_tokens"] for r in results)
    return {
        "pages/s": n / seconds,
        "tokens/s": tokens / seconds,
        "steps/page": sum(r.stats["decoding_steps"] for r in results) / n,
        "tokens/page": tokens / n,
        "forks/page": sum(r.stats["forks"] for r in results) / n,
        "cache hit": cached / child_prompt if child_prompt else 0.0,
        "seconds": seconds,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=str(REPO / "tests" / "fixtures" / "tiny-hpd"))
    parser.add_argument("--pages", type=int, default=64)
    parser.add_argument("--batch-sizes", default="1,16,64")
    parser.add_argument("--max-tokens", type=int, default=400)
    parser.add_argument("--dpi", type=int, default=72)
    parser.add_argument("--dtype", default=None, help="default: the engine's (float32 on CPU)")
    parser.add_argument(
        "--forking-instrument",
        action="store_true",
        help="rewire --model into the test suite's chain that forks every 47 tokens",
    )
    args = parser.parse_args()
    os.environ.setdefault("OMP_NUM_THREADS", "1")

    model = Path(args.model)
    tmp = None
    if args.forking_instrument:
        from tests.test_vllm_engine import _write_forking_checkpoint

        tmp = tempfile.TemporaryDirectory()
        model = _write_forking_checkpoint(Path(tmp.name) / "ckpt")
    batch_sizes = [int(b) for b in args.batch_sizes.split(",")]
    images = sample_images(args.dpi, args.pages)
    print(
        f"model {args.model}{' (forking instrument)' if tmp else ''}, {len(images)} pages, "
        f"max_tokens {args.max_tokens}, {args.dpi} dpi, dtype {args.dtype}"
    )
    header = f"{'mode':6} {'batch':>5} {'pages/s':>8} {'tok/s':>8} {'steps/pg':>9} "
    header += f"{'tok/pg':>7} {'forks/pg':>8} {'cache':>6}"
    for fork in (False, True):
        config = EngineConfig(
            model=str(model),
            fork=fork,
            dtype=args.dtype,
            max_tokens=args.max_tokens,
            max_model_len=16384,
            extra={"kv_cache_gib": 1.0},
        )
        with VllmEngine(config) as engine:
            print(
                f"\n{'fork' if fork else 'plain'}: engine start-up {engine.startup_seconds:.1f} s"
            )
            prepare = engine.preparer()
            payloads = [prepare(image) for image in images]
            bench(engine, payloads[: min(4, len(payloads))], 4)  # warm-up
            print(header)
            for batch in batch_sizes:
                row = bench(engine, payloads, batch)
                print(
                    f"{'fork' if fork else 'plain':6} {batch:5d} {row['pages/s']:8.2f} "
                    f"{row['tokens/s']:8.0f} {row['steps/page']:9.1f} {row['tokens/page']:7.1f} "
                    f"{row['forks/page']:8.2f} {row['cache hit']:6.1%}"
                )
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
    print(f"\npeak resident memory of this process: {peak:.2f} GiB")
    if tmp is not None:
        tmp.cleanup()


if __name__ == "__main__":
    main()
