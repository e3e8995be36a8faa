"""Instructions per page of the --docling --chunks export, counted by callgrind (not disturbed by
other work on the machine, unlike bench_export.py's timings).

Renders bench_export's 200 typical pages and exports them once (not counted: imports, caches,
each item class's first check), then switches callgrind's instrumentation on around one more
export of both outputs (token counts forgotten first, as bench_export does) and off again:

    PYTHONHASHSEED=0 OMP_NUM_THREADS=1 valgrind --tool=callgrind --instr-atstart=no \\
        .venv/bin/python benchmarks/callgrind_export.py [--pages 200]

Instructions per page: valgrind's `Collected` line divided by the pages (a few minutes)."""

from __future__ import annotations

import argparse
import os
import subprocess

from bench_export import documents

from hpdparse.export.files import build_exports
from hpdparse.export.tokenizers import _tekken_count, load_tokenizer
from hpdparse.markdown.render import RenderOptions, gc_paused


def _instrumentation(state: str) -> None:
    command = ["callgrind_control", "-i", state, str(os.getpid())]
    subprocess.run(command, check=True, capture_output=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pages", type=int, default=200)
    args = parser.parse_args()
    docs = documents(args.pages, 20)
    load_tokenizer(None, 512)
    options = RenderOptions(docling=True, chunks=True)
    for doc in docs:
        build_exports(doc, options)
    _tekken_count.cache_clear()
    _instrumentation("on")
    with gc_paused():
        for doc in docs:
            build_exports(doc, options)
    _instrumentation("off")
    print(f"{args.pages} pages: divide valgrind's 'Collected' count by {args.pages}")


if __name__ == "__main__":
    main()
