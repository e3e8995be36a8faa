"""--docling and --chunks export, pages/s on one core (the target: >= 500 pages/s, so that the
export is never the bottleneck of a run).

Documents of corpus-like pages (bench_render's typical 30-block page: headings, paragraphs with
inline math, formulas, a list, a figure with caption, a table with caption, footnote, page
number), rendered first (not timed); then timed: the DoclingDocument built and serialised to
`<stem>.docling.json` bytes, and the chunks (`<stem>.chunks.jsonl` bytes, default tokenizer and
limit). Prints figures; asserts nothing. Run it on one core:

    OMP_NUM_THREADS=1 taskset -c 0 .venv/bin/python benchmarks/bench_export.py [--pages 400]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")

from bench_render import typical_page

from hpdparse.engines.base import DecodeRecord
from hpdparse.export.chunks import chunk_records, make_chunker
from hpdparse.export.docling import to_docling
from hpdparse.export.files import build_exports
from hpdparse.markdown.records import DocumentRecord, PageRecord
from hpdparse.markdown.render import RenderedDocument, RenderOptions, render_document
from hpdparse.sources.document import PageGeometry


def documents(pages: int, pages_per_document: int) -> list[RenderedDocument]:
    rendered = []
    for first in range(0, pages, pages_per_document):
        numbers = range(first + 1, min(first + pages_per_document, pages) + 1)
        records = [
            PageRecord(
                number=n - first,
                geometry=PageGeometry(1654, 2339, dpi=200, width_pt=595.0, height_pt=842.0),
                decode=DecodeRecord("stop"),
                raw=typical_page(n),
            )
            for n in numbers
        ]
        doc = DocumentRecord(
            source=f"/in/d{first}.pdf", stem=f"d{first}", page_count=len(records), pages=records
        )
        rendered.append(render_document(doc, RenderOptions()))
    return rendered


def timed(work, pages: int) -> tuple[float, float]:
    """(pages per wall second, pages per CPU second) of `work()`."""
    start, cpu = time.perf_counter(), time.process_time()
    work()
    return pages / (time.perf_counter() - start), pages / (time.process_time() - cpu)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pages", type=int, default=400)
    parser.add_argument("--pages-per-document", type=int, default=20)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()

    docs = documents(args.pages, args.pages_per_document)
    start = time.perf_counter()
    chunker = make_chunker(512, None)
    print(f"default tokenizer loaded in {time.perf_counter() - start:.2f} s (once per process)")
    exports = [to_docling(d) for d in docs]
    chunks = [chunk_records(e, d.json, chunker) for e, d in zip(exports, docs, strict=True)]
    total = sum(len(c) for c in chunks)
    print(
        f"{args.pages} pages in documents of {args.pages_per_document}: "
        f"{total} chunks of <= 512 tokens ({total / args.pages:.1f} a page)"
    )

    def docling_only() -> None:
        for d in docs:
            build_exports(d, RenderOptions(docling=True))

    def chunks_only() -> None:
        for d in docs:
            build_exports(d, RenderOptions(chunks=True))

    def both() -> None:
        for d in docs:
            build_exports(d, RenderOptions(docling=True, chunks=True))

    for label, work in [
        ("--docling (build + JSON)", docling_only),
        ("--chunks (build + chunk)", chunks_only),
        ("--docling --chunks", both),
    ]:
        rates = [timed(work, args.pages) for _ in range(args.repeat)]
        wall = statistics.median(r[0] for r in rates)
        cpu = statistics.median(r[1] for r in rates)
        print(f"{label:26s} {wall:7.0f} pages/s (wall), {cpu:7.0f} pages per CPU-second")


if __name__ == "__main__":
    main()
