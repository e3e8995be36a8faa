"""What keeping the chosen tokens' log-probabilities (the confidence scores) costs the vllm
engine: the same pages decoded with the engine option `logprobs` on and off, alternately on one
started engine (in-process engine core), so that both see the same machine load.

    PYTHONPATH=$PWD OMP_NUM_THREADS=1 taskset -c 0 python benchmarks/bench_vllm_logprobs.py \
        [--model tests/fixtures/tiny-hpd] [--pages 64] [--rounds 12] [--batch 16] [--dpi 72] \
        [--no-fork] [--tiles N] [--kv-cache-gib 1] [--attribute]
        [--profile DIR [--profile-rounds 4]]

At the real model's size: `--model` a real-size instrument (benchmarks/instrument.py; with
`--vision-layers 1` its decoder is the real one's and its vision encoder no longer costs minutes a
page here) and `--tiles N`, pages of N random 448x448 tiles (benchmarks/bench_instrument.py's,
distinct pages) instead of the sample pages, which only the tiny checkpoint reads.

Each round runs both variants, in the order on/off, then off/on the next round (ABBA), and
measures each run's wall seconds and the CPU seconds of this process (`time.process_time`: all
its threads; the engine core runs in this process). On a shared machine the CPU seconds are
steadier than the wall time, which another process's load stretches, but they too vary between
rounds (caches, a busy sibling core): trust the per-round ratios, not single runs. Pin the
process to one core with one OpenMP thread so that no thread waits for another.

Prints each run, then per measure (CPU, wall) the median seconds with and without, and the
per-round ratios (with/without: median with a ~95% confidence interval, quartiles, range).
Checks that every run gives the same text, that only the runs with logprobs have them, and that
every run with them has the same ones.
With ``--profile DIR`` it then runs each variant ``--profile-rounds`` more times under cProfile
(summed in ``DIR/on.prof``, ``DIR/off.prof``) and prints the functions whose cumulative time
grows most with logprobs, and the growth of self time by where the code lives. ``--attribute``
times a few named vLLM and hpdparse functions (`ATTRIBUTED`) in every run and prints their median
CPU seconds per run both ways: the attribution without cProfile's overhead per Python call.
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import math
import os
import pstats
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from benchmarks.bench_instrument import page_tiles  # noqa: E402
from benchmarks.bench_vllm import sample_images  # noqa: E402
from hpdparse.engines.base import EngineConfig, PageRequest  # noqa: E402
from hpdparse.engines.vllm import host_memory  # noqa: E402
from hpdparse.engines.vllm.engine import VllmEngine  # noqa: E402
from hpdparse.engines.vllm.options import VllmOptions  # noqa: E402


class GcClock:
    """The time Python's cyclic garbage collector takes, and its collections per generation."""

    def __init__(self) -> None:
        self.seconds = 0.0
        self.collections = [0, 0, 0]
        self._began = 0.0
        gc.callbacks.append(self._callback)

    def _callback(self, phase: str, info: dict) -> None:
        if phase == "start":
            self._began = time.process_time()
        else:
            self.seconds += time.process_time() - self._began
            self.collections[info["generation"]] += 1

    def reset(self) -> None:
        self.seconds, self.collections = 0.0, [0, 0, 0]


GC = GcClock()


def run(engine: VllmEngine, payloads: list, batch: int) -> tuple[float, float, dict]:
    """(wall seconds, CPU seconds, results by key) of one run over `payloads`; `GC` holds the
    run's garbage collections."""
    GC.reset()
    wall, cpu = time.perf_counter(), time.process_time()
    results = list(engine.run((PageRequest(i, p) for i, p in enumerate(payloads)), batch))
    return time.perf_counter() - wall, time.process_time() - cpu, {r.key: r for r in results}


def quartiles(values: list[float]) -> tuple[float, float, float]:
    if len(values) < 2:
        return values[0], values[0], values[0]
    q1, q2, q3 = statistics.quantiles(values, n=4, method="inclusive")
    return q1, q2, q3


def median_interval(values: list[float]) -> tuple[float, float]:
    """A distribution-free ~95% confidence interval of the median (order statistics, normal
    approximation of the binomial); the whole range below 6 values."""
    ordered = sorted(values)
    k = max(0, int(len(ordered) / 2 - 0.98 * math.sqrt(len(ordered))))
    return ordered[k], ordered[-1 - k]


def summary(name: str, on: list[float], off: list[float]) -> float:
    """Print one measure's medians and per-round ratios; return the median ratio - 1."""
    ratios = [a / b for a, b in zip(on, off, strict=True)]
    q1, q2, q3 = quartiles(ratios)
    low, high = median_interval(ratios)
    print(
        f"{name}: median on {statistics.median(on):.2f} s, off {statistics.median(off):.2f} s "
        f"(ratio of medians {statistics.median(on) / statistics.median(off) - 1:+.1%}); "
        f"per-round ratio median {q2 - 1:+.1%} (95% CI {low - 1:+.1%}..{high - 1:+.1%}), "
        f"quartiles {q1 - 1:+.1%}..{q3 - 1:+.1%}, "
        f"range {min(ratios) - 1:+.1%}..{max(ratios) - 1:+.1%}; "
        f"off runs vary by {max(off) / min(off) - 1:.0%}"
    )
    return q2 - 1


# Where a logprob's host time can go, timed by `--attribute` (CPU seconds per run, both ways).
ATTRIBUTED = (
    ("vllm.v1.sample.rejection_sampler", "RejectionSampler", "forward"),
    ("vllm.v1.sample.rejection_sampler", "RejectionSampler", "_get_logprobs_tensors"),
    ("vllm.v1.sample.rejection_sampler", "RejectionSampler", "parse_output"),
    ("vllm.v1.sample.sampler", "Sampler", "gather_logprobs"),
    ("vllm.v1.sample.sampler", None, "batched_count_greater_than"),  # torch.compile'd
    ("vllm.v1.sample.sampler", "Sampler", "forward"),
    ("vllm.v1.core.sched.scheduler", "Scheduler", "update_from_output"),
    ("vllm.v1.engine.output_processor", "OutputProcessor", "process_outputs"),
    ("vllm.v1.engine.logprobs", "LogprobsProcessor", "update_from_output"),
    ("hpdparse.engines.vllm.scheduling", "PageScheduler", "_absorb"),
    ("hpdparse.engines.vllm.scheduling", None, "chosen_logprobs"),
    ("hpdparse.engines.vllm.pages", "PageInFlight", "result"),
)


def attribute(spots: tuple = ATTRIBUTED) -> dict[str, list[float]]:
    """Wrap each named function in this process with a CPU-time accumulator (vLLM's own files
    are not touched); returns name -> [seconds, calls], reset by `run`'s caller."""
    import importlib

    totals: dict[str, list[float]] = {}
    for module_name, class_name, name in spots:
        owner = importlib.import_module(module_name)
        if class_name:
            owner = getattr(owner, class_name)
        raw = owner.__dict__[name]
        kind = type(raw) if isinstance(raw, staticmethod | classmethod) else None
        function = raw.__func__ if kind else raw
        key = f"{class_name + '.' if class_name else ''}{name}"
        totals[key] = [0.0, 0]

        def timed(*args: object, _f=function, _t=totals[key], **kwargs: object) -> object:
            began = time.process_time()
            try:
                return _f(*args, **kwargs)
            finally:
                _t[0] += time.process_time() - began
                _t[1] += 1

        setattr(owner, name, kind(timed) if kind else timed)
    return totals


def profile(
    engine: VllmEngine, payloads: list, batch: int, out: Path, rounds: int, top: int = 30
) -> None:
    """`rounds` alternating runs of each variant under cProfile, summed per variant; the
    functions whose cumulative time grows most with logprobs."""
    out.mkdir(parents=True, exist_ok=True)
    profilers = {True: cProfile.Profile(), False: cProfile.Profile()}
    for round_ in range(rounds):
        for logprobs in (True, False) if round_ % 2 == 0 else (False, True):
            engine.options.logprobs = logprobs
            profilers[logprobs].enable()
            run(engine, payloads, batch)
            profilers[logprobs].disable()
    stats = {}
    for logprobs, profiler in profilers.items():
        path = out / ("on.prof" if logprobs else "off.prof")
        profiler.dump_stats(path)
        stats[logprobs] = pstats.Stats(str(path)).stats  # type: ignore[attr-defined]
    totals = {k: sum(v[2] for v in s.values()) for k, s in stats.items()}
    print(
        f"profile ({rounds} runs each, summed): total self time on {totals[True]:.2f} s, "
        f"off {totals[False]:.2f} s"
    )

    def cumulative(s: dict, key: tuple) -> tuple[float, float, int]:
        entry = s.get(key)
        return (entry[3], entry[2], entry[1]) if entry else (0.0, 0.0, 0)

    keys = set(stats[True]) | set(stats[False])
    rows = []
    for key in keys:
        (cum_on, self_on, calls_on), (cum_off, self_off, calls_off) = (
            cumulative(stats[True], key),
            cumulative(stats[False], key),
        )
        rows.append((cum_on - cum_off, self_on - self_off, calls_on - calls_off, key))
    print(f"{'d cumul s':>9} {'d self s':>8} {'d calls':>8}  function")
    for d_cum, d_self, d_calls, (file, line, func) in sorted(rows, reverse=True)[:top]:
        print(f"{d_cum:9.3f} {d_self:8.3f} {d_calls:8d}  {_where(file)}:{line}({func})")
    areas: dict[str, float] = {}
    for _, d_self, _, (file, _, _) in rows:
        area = "/".join(_where(file).split("/")[:3]) if "/" in _where(file) else "builtins"
        areas[area] = areas.get(area, 0.0) + d_self
    print(
        "self time growth by area (s): "
        + ", ".join(
            f"{area} {d:+.2f}" for area, d in sorted(areas.items(), key=lambda a: -abs(a[1]))[:12]
        )
    )


def _where(file: str) -> str:
    return file.split("site-packages/")[-1].replace(str(REPO) + "/", "")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=str(REPO / "tests" / "fixtures" / "tiny-hpd"))
    parser.add_argument("--pages", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=12)
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--dpi", type=int, default=72)
    parser.add_argument("--max-tokens", type=int, default=2000)
    parser.add_argument("--no-fork", action="store_true")
    parser.add_argument("--tiles", type=int, help="pages of N random tiles (for an instrument)")
    parser.add_argument("--kv-cache-gib", type=float, default=1.0)
    parser.add_argument("--profile", type=Path, help="cProfile both variants, to this folder")
    parser.add_argument("--profile-rounds", type=int, default=4)
    parser.add_argument(
        "--attribute", action="store_true", help="time named vLLM and hpdparse functions per run"
    )
    args = parser.parse_args()
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    config = EngineConfig(
        model=args.model, fork=not args.no_fork, max_tokens=args.max_tokens, max_model_len=4096
    )
    cpus = sorted(os.sched_getaffinity(0))
    print(
        f"cpus {cpus}, OMP_NUM_THREADS {os.environ['OMP_NUM_THREADS']}, "
        f"load average before: {os.getloadavg()[0]:.1f}",
        flush=True,
    )
    wall: dict[bool, list[float]] = {True: [], False: []}
    cpu: dict[bool, list[float]] = {True: [], False: []}
    texts: dict[bool, dict] = {}
    confidences: dict = {}
    spent: dict[bool, dict[str, list[float]]] = {True: {}, False: {}}
    with VllmEngine(config, VllmOptions(kv_cache_gib=args.kv_cache_gib)) as engine:
        totals = attribute() if args.attribute else {}
        print(f"malloc keeps freed memory (host_memory.py): {host_memory.applied()}")
        if args.tiles:
            payloads = page_tiles(args.pages, args.tiles)
        else:
            prepare = engine.preparer()
            payloads = [prepare(image) for image in sample_images(args.dpi, args.pages)]
        run(engine, payloads[:4], 4)  # warm-up
        for round_ in range(args.rounds):
            for logprobs in (True, False) if round_ % 2 == 0 else (False, True):
                engine.options.logprobs = logprobs  # read by each run
                for entry in totals.values():
                    entry[:] = [0.0, 0]
                seconds, cpu_seconds, results = run(engine, payloads, args.batch)
                for key, (spent_s, _calls) in totals.items():
                    spent[logprobs].setdefault(key, []).append(spent_s)
                wall[logprobs].append(seconds)
                cpu[logprobs].append(cpu_seconds)
                text = {k: r.text for k, r in results.items()}
                assert texts.setdefault(logprobs, text) == text, "the text differs between runs"
                assert all((r.logprobs is not None) == logprobs for r in results.values())
                if logprobs:
                    got = {k: r.logprobs for k, r in results.items()}
                    assert confidences.setdefault("on", got) == got, "logprobs differ between runs"
                tokens = sum(r.output_tokens for r in results.values())
                print(
                    f"round {round_:2} logprobs {'on ' if logprobs else 'off'} "
                    f"wall {seconds:6.2f} s  cpu {cpu_seconds:6.2f} s  "
                    f"({cpu_seconds / tokens * 1e6:4.0f} cpu-us/token, {tokens} tokens)  "
                    f"gc {GC.seconds:5.2f} s {'/'.join(map(str, GC.collections))}  "
                    f"load {os.getloadavg()[0]:.1f}",
                    flush=True,
                )
        assert texts[True] == texts[False], "the text differs with and without logprobs"
        expected = Path(args.model) / "expected.txt"  # an instrument's page
        if expected.is_file():
            page = expected.read_text(encoding="utf-8")
            right = sum(text == page for text in texts[True].values())
            print(f"{right} of {len(texts[True])} pages gave the instrument's expected text")
        print(f"load average after: {os.getloadavg()[0]:.1f}")
        for key in totals:
            on, off = statistics.median(spent[True][key]), statistics.median(spent[False][key])
            print(f"  {key:42} median cpu s per run: on {on:6.3f}, off {off:6.3f}, {on - off:+.3f}")
        summary("wall", wall[True], wall[False])
        cost = summary("cpu ", cpu[True], cpu[False])
        print(
            f"logprobs cost: {cost:+.1%} CPU time (median of {args.rounds} per-round ratios); "
            "the same text both ways"
        )
        if args.profile:
            profile(engine, payloads, args.batch, args.profile, args.profile_rounds)


if __name__ == "__main__":
    main()
