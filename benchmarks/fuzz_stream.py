"""Long fuzz run of the stream parser and renderer (the test suite runs about a thousand examples).

Random token soup and grammar-built-then-corrupted pages, rendered with random options: nothing
may raise, the output must be valid UTF-8 and hold no HTML outside the allowed table tags.
Prints examples run and examples/s; a failure prints hypothesis' minimal example and exits 1.

    .venv/bin/python benchmarks/fuzz_stream.py [--examples 100000] [--seed 0]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st

from tests.helpers.stream_strategies import (
    check_document,
    grammar_streams,
    options_strategy,
    random_streams,
)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--examples", type=int, default=100_000, help="total, over both kinds")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    half = max(args.examples // 2, 1)
    counts = {"random": 0, "grammar": 0}

    def run(kind: str, strategy: st.SearchStrategy[str]) -> None:
        @seed(args.seed)
        @settings(
            max_examples=half,
            deadline=None,
            database=None,
            derandomize=False,
            suppress_health_check=list(HealthCheck),
        )
        @given(
            raws=st.lists(strategy, min_size=1, max_size=3),
            finish=st.sampled_from(["stop", "length"]),
            options=options_strategy,
        )
        def prop(raws, finish, options) -> None:
            counts[kind] += 1
            if counts[kind] % 10_000 == 0:
                print(f"{kind:8s} {counts[kind]:8d} examples so far", flush=True)
            check_document(raws, finish, options)

        start = time.perf_counter()
        prop()
        elapsed = time.perf_counter() - start
        print(
            f"{kind:8s} {counts[kind]:8d} examples in {elapsed:7.1f} s "
            f"({counts[kind] / elapsed:6.0f}/s), no failure"
        )

    try:
        run("random", random_streams())
        run("grammar", grammar_streams())
    except Exception as error:
        print(f"FAILED: {type(error).__name__}: {error}")
        return 1
    print(f"total    {sum(counts.values()):8d} examples")
    return 0


if __name__ == "__main__":
    sys.exit(main())
