"""--docling and --chunks export, pages/s on one core (the export must stay well under decoding
cost, so that it is never the bottleneck of a run).

Documents of corpus-like pages (bench_render's typical 30-block page: headings, paragraphs with
inline math, formulas, a list, a figure with caption, a table with caption, footnote, page
number), rendered first (not timed); then timed: the DoclingDocument built (with provenance, as
--docling writes it; without, as --chunks alone builds it: the chunks take their pages and boxes
from the blocks) and serialised to `<stem>.docling.json` bytes, and the chunks
(`<stem>.chunks.jsonl` bytes, default tokenizer and limit). Prints the pages/s of each stage
alone (our chunker next to docling-core's HybridChunker, whose chunks it reproduces), then of
each output as the flags ask for it; asserts nothing.
Token counts, which the chunker remembers within a process, are forgotten before each timed run:
a real run meets each document's texts once. The last line reads
`pages per CPU-second: docling D, chunks C, both B` (medians of the repeats); the line before it
gives the best repeat of each, the figure least slowed by other work on a shared machine (compare
code versions by alternating runs). Run it on one core:

    OMP_NUM_THREADS=1 taskset -c 0 .venv/bin/python benchmarks/bench_export.py [--pages 400]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench_render import typical_page

from hpdparse.engines.base import PageResult
from hpdparse.export.chunks import chunk_records, records_of
from hpdparse.export.docling import docling_json, to_docling
from hpdparse.export.files import build_exports
from hpdparse.export.tokenizers import _tekken_count, load_tokenizer
from hpdparse.markdown.records import DocumentRecord
from hpdparse.markdown.render import RenderedDocument, RenderOptions, gc_paused, render_document
from hpdparse.sources.document import PageGeometry
from hpdparse.store.raw_pages import RawPage
from tests.export.export_cases import hybrid_chunks


def documents(pages: int, pages_per_document: int) -> list[RenderedDocument]:
    rendered = []
    for first in range(0, pages, pages_per_document):
        numbers = range(first + 1, min(first + pages_per_document, pages) + 1)
        records = [
            RawPage(
                number=n - first,
                result=PageResult(n - first, typical_page(n), "stop"),
                geometry=PageGeometry(1654, 2339, dpi=200, width_pt=595.0, height_pt=842.0),
            )
            for n in numbers
        ]
        doc = DocumentRecord(
            source=f"/in/d{first}.pdf", stem=f"d{first}", page_count=len(records), pages=records
        )
        rendered.append(render_document(doc, RenderOptions()))
    return rendered


def timed(work, pages: int, repeat: int) -> tuple[float, float, float]:
    """Median pages per wall second, median and best pages per CPU second of `repeat` runs of
    `work()` (the best is the run least slowed by other work on a shared machine)."""
    rates = []
    for _ in range(repeat):
        # Token counts are remembered within a process (the chunker counts the same texts
        # again and again); a real run meets each document's texts once: none remembered.
        _tekken_count.cache_clear()
        start, cpu = time.perf_counter(), time.process_time()
        with gc_paused():  # as build_exports runs (many small acyclic objects)
            work()
        wall, used = time.perf_counter() - start, time.process_time() - cpu
        rates.append((pages / wall, pages / used))
    cpu_rates = [r[1] for r in rates]
    return statistics.median(r[0] for r in rates), statistics.median(cpu_rates), max(cpu_rates)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pages", type=int, default=400)
    parser.add_argument("--pages-per-document", type=int, default=20)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()

    docs = documents(args.pages, args.pages_per_document)
    start = time.perf_counter()
    load_tokenizer(None, 512)
    print(f"default tokenizer loaded in {time.perf_counter() - start:.2f} s (once per process)")
    exports = [to_docling(d) for d in docs]
    chunks = [chunk_records(e, 512) for e in exports]
    total = sum(len(c) for c in chunks)
    print(
        f"{args.pages} pages in documents of {args.pages_per_document}: "
        f"{total} chunks of <= 512 tokens ({total / args.pages:.1f} a page)"
    )

    def hybrid_chunker() -> None:
        for e in exports:
            records_of(e, hybrid_chunks(e.document, 512), 512)

    def run(docling: bool = False, chunks: bool = False):
        def work() -> None:
            for d in docs:
                build_exports(d, RenderOptions(docling=docling, chunks=chunks))

        return work

    def our_chunker() -> None:
        for e in exports:
            chunk_records(e, 512)

    stages = [
        ("DoclingDocument built", lambda: [to_docling(d) for d in docs]),
        ("  without provenance", lambda: [to_docling(d, provenance=False) for d in docs]),
        ("docling.json written", lambda: [docling_json(e.document) for e in exports]),
        ("chunks made (ours)", our_chunker),
        ("chunks made (HybridChunker)", hybrid_chunker),
    ]
    outputs = [
        ("--docling", run(docling=True)),
        ("--chunks", run(chunks=True)),
        ("--docling --chunks", run(docling=True, chunks=True)),
    ]
    print("stage (each alone)              pages/s (wall)   pages per CPU-second (best)")
    for label, work in stages:
        wall, cpu, best = timed(work, args.pages, args.repeat)
        print(f"  {label:30s} {wall:9.0f} {cpu:20.0f} ({best:.0f})")
    print("output (what the flags cost)")
    figures, fastest = [], []
    for label, work in outputs:
        wall, cpu, best = timed(work, args.pages, args.repeat)
        figures.append(cpu)
        fastest.append(best)
        print(f"  {label:30s} {wall:9.0f} {cpu:20.0f} ({best:.0f})")
    docling, chunks_only, both = fastest
    print(
        f"best of {args.repeat}, pages per CPU-second: "
        f"docling {docling:.0f}, chunks {chunks_only:.0f}, both {both:.0f}"
    )
    docling, chunks_only, both = figures
    print(f"pages per CPU-second: docling {docling:.0f}, chunks {chunks_only:.0f}, both {both:.0f}")


if __name__ == "__main__":
    main()
