"""What keeping the chosen tokens' log-probabilities (the confidence scores) costs the vllm
engine: the same pages decoded with the engine option `logprobs` on and off, alternately on one
started engine, so that both see the same machine load.

    PYTHONPATH=$PWD python benchmarks/bench_vllm_logprobs.py [--model tests/fixtures/tiny-hpd]
        [--pages 32] [--rounds 4] [--batch 16] [--dpi 72] [--no-fork]

Prints each run's seconds, the load average before and after, the median seconds with and
without, and the last line ``logprobs cost: +X% (median of N alternating runs each)``. Checks
that the text is the same both ways and that only the runs with logprobs have them.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from benchmarks.bench_vllm import sample_images  # noqa: E402
from hpdparse.engines.base import EngineConfig, PageRequest  # noqa: E402
from hpdparse.engines.vllm.engine import VllmEngine  # noqa: E402
from hpdparse.engines.vllm.options import VllmOptions  # noqa: E402


def run(engine: VllmEngine, payloads: list, batch: int) -> tuple[float, dict]:
    began = time.perf_counter()
    results = list(engine.run((PageRequest(i, p) for i, p in enumerate(payloads)), batch))
    return time.perf_counter() - began, {r.key: r for r in results}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=str(REPO / "tests" / "fixtures" / "tiny-hpd"))
    parser.add_argument("--pages", type=int, default=32)
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--dpi", type=int, default=72)
    parser.add_argument("--max-tokens", type=int, default=2000)
    parser.add_argument("--no-fork", action="store_true")
    args = parser.parse_args()
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    config = EngineConfig(
        model=args.model, fork=not args.no_fork, max_tokens=args.max_tokens, max_model_len=4096
    )
    print(f"load average before: {os.getloadavg()[0]:.1f}", flush=True)
    times: dict[bool, list[float]] = {True: [], False: []}
    texts: dict[bool, dict] = {}
    with VllmEngine(config, VllmOptions(kv_cache_gib=1.0)) as engine:
        prepare = engine.preparer()
        payloads = [prepare(image) for image in sample_images(args.dpi, args.pages)]
        run(engine, payloads[:4], 4)  # warm-up
        for round_ in range(args.rounds):
            for logprobs in (True, False) if round_ % 2 == 0 else (False, True):
                engine.options.logprobs = logprobs  # read by each run
                seconds, results = run(engine, payloads, args.batch)
                times[logprobs].append(seconds)
                texts[logprobs] = {k: r.text for k, r in results.items()}
                assert all((r.logprobs is not None) == logprobs for r in results.values())
                print(
                    f"round {round_} logprobs {'on ' if logprobs else 'off'} {seconds:7.2f} s  "
                    f"load {os.getloadavg()[0]:.1f}",
                    flush=True,
                )
    assert texts[True] == texts[False], "the text differs with and without logprobs"
    on, off = statistics.median(times[True]), statistics.median(times[False])
    spread = max(times[False]) / min(times[False]) - 1
    print(f"load average after: {os.getloadavg()[0]:.1f}")
    print(f"median: on {on:.2f} s, off {off:.2f} s; runs without vary by {spread:.0%}")
    print(f"logprobs cost: {on / off - 1:+.1%} (median of {args.rounds} alternating runs each)")


if __name__ == "__main__":
    main()
