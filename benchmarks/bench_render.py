"""Raw HPD page stream -> Markdown + JSON, pages/s on one core (the target is >= 1,000 pages/s).

A typical page: 30 blocks (header, title, headings, paragraphs with inline math, two display
formulas, a list, a figure with caption, a 6x5 table with a caption, a footnote, page number).
Prints figures; asserts nothing.

    .venv/bin/python benchmarks/bench_render.py [--pages 2000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")

from hpdparse.engines.base import PageResult
from hpdparse.hpd.stream import parse_page
from hpdparse.markdown.records import DocumentRecord
from hpdparse.markdown.render import RenderOptions, render_document
from hpdparse.sources.document import PageGeometry
from hpdparse.store.raw_pages import RawPage

PARAGRAPH = (
    "Hierarchical decoding lets the layout branch fork a child per region, so that the "
    "children run concurrently while sharing the prefix \\(K_{{{tag}}} = 2^{{n}}\\) of the "
    "cache; the result is the same text as serial decoding, at a fraction of the sequential steps."
)


def typical_page(seed: int) -> str:
    """A 30-block page stream; `seed` varies the text so no cache can help."""
    rows = "".join(
        f"<tr><td>Model {seed}-{r}</td><td>{r * 3.5:.1f}</td><td>{r * 7}</td>"
        f"<td>\\(\\pm {seed}.{r}\\)</td><td>ok</td></tr>"
        for r in range(5)
    )
    table = (
        "<table><tr><th>Name</th><th>Score</th><th>Tokens</th><th>Error</th><th>Note</th></tr>"
        + rows
        + "</table>"
    )
    blocks = [
        "<BLOCK>header [80, 20, 920, 35]<CHILD>Journal of Document Parsing, 2026",
        "<BLOCK>aside_text [20, 200, 40, 800]<CHILD>arXiv:2611.00001v2 [cs.CL]",
        f"<BLOCK>paragraph_title [80, 50, 500, 70]<CHILD>{seed % 9 + 1} Method",
    ]
    y = 80
    for i in range(14):
        text = PARAGRAPH.format(tag=f"{seed}.{i}")
        blocks.append(f"<BLOCK>text [80, {y}, 920, {y + 20}]<CHILD>{text}")
        y += 22
        if i == 3:
            blocks.append(
                f"<BLOCK>equation [300, {y}, 700, {y + 20}]<CHILD>\\[\n"
                "\\mathcal{L} = -\\sum_{t=1}^{T} \\log p(y_t \\mid y_{<t}, x)"
                f" \\tag{{{seed}}}\n\\]"
            )
        if i == 6:
            blocks.append(
                f"<BLOCK>equation [300, {y}, 700, {y + 20}]<CHILD>\\[\n"
                f"\\left( a + b \\right)^{{{seed}}} = a^2 + 2ab + b^2 \\quad\n\\]"
            )
        if i == 8:
            blocks.append(f"<BLOCK>title [80, {y}, 500, {y + 15}]<CHILD>{seed % 9 + 1}.2 Results")
    blocks += [
        "<BLOCK>list [80, 600, 920, 660]",
        "<BLOCK>text [90, 602, 910, 618]<CHILD>• Fork children share the prefix.",
        "<BLOCK>text [90, 620, 910, 638]<CHILD>• Children never fork again.",
        "<BLOCK>text [90, 640, 910, 658]<CHILD>• Greedy decoding is deterministic.",
        "<BLOCK>image [100, 665, 500, 760]",
        "<BLOCK>image_caption [100, 762, 500, 775]<CHILD>Figure 2: Steps per page.",
        "<BLOCK>table_caption [520, 665, 920, 675]<CHILD>Table 3: Throughput by model.",
        f"<BLOCK>table [520, 680, 920, 780]<CHILD>{table}",
        "<BLOCK>page_footnote [80, 930, 920, 945]<CHILD>1 Measured on one core.",
        f"<BLOCK>page_number [480, 960, 520, 975]<CHILD>{seed}",
    ]
    return "".join(blocks)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pages", type=int, default=2000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()

    raws = [typical_page(i) for i in range(args.pages)]
    blocks = len(parse_page(raws[0]).blocks)
    pages = [
        RawPage(i + 1, PageResult(i + 1, raw, "stop"), PageGeometry(1654, 2339))
        for i, raw in enumerate(raws)
    ]
    print(f"typical page: {blocks} blocks, {len(raws[0])} characters")

    # Wall-clock and CPU-time rates: on a shared machine the CPU-time figure is the one that
    # says what one free core would do.
    parse_rates, render_rates, render_cpu_rates = [], [], []
    for _ in range(args.repeat):
        start = time.perf_counter()
        for raw in raws:
            parse_page(raw, "stop")
        parse_rates.append(args.pages / (time.perf_counter() - start))

        # One document per page, as the pipeline renders them; JSON serialised too.
        start, cpu = time.perf_counter(), time.process_time()
        for page in pages:
            doc = DocumentRecord(source="/in/x.pdf", stem="x", page_count=1, pages=[page])
            rendered = render_document(doc, RenderOptions())
            json.dumps(rendered.json, ensure_ascii=False)
        render_rates.append(args.pages / (time.perf_counter() - start))
        render_cpu_rates.append(args.pages / (time.process_time() - cpu))

    # A long document too: merges and heading levels run across all its pages.
    doc = DocumentRecord(source="/in/x.pdf", stem="x", page_count=len(pages), pages=pages)
    start, cpu = time.perf_counter(), time.process_time()
    rendered = render_document(doc, RenderOptions())
    json.dumps(rendered.json, ensure_ascii=False)
    whole = args.pages / (time.perf_counter() - start)
    whole_cpu = args.pages / (time.process_time() - cpu)

    print(f"parse only:                 {statistics.median(parse_rates):8.0f} pages/s (wall)")
    print(
        f"raw -> Markdown + JSON:     {statistics.median(render_rates):8.0f} pages/s (wall), "
        f"{statistics.median(render_cpu_rates):.0f} pages per CPU-second (median of {args.repeat})"
    )
    print(
        f"one {args.pages}-page document: {whole:8.0f} pages/s (wall), "
        f"{whole_cpu:.0f} per CPU-second"
    )


if __name__ == "__main__":
    main()
