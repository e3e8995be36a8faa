"""Rasterization speed on one core: pages/s at 200 dpi for a text-heavy multi-page PDF.

Usage: .venv/bin/python benchmarks/bench_rasterize.py [--pdf FILE] [--dpi 200] [--rounds 3]
                                                      [--max-pages N]

Default PDF: the shared corpus' pdfjs__tracemonkey.pdf (14 pages, a two-column paper); without the
corpus a generated 14-page text PDF. Prints pages/s (best of --rounds passes over all pages) for:
- PyMuPDF alone (get_pixmap, the floor for anything built on it),
- SourceDocument.rasterize (hpdparse.sources: PIL RGB image, size limits, labels, warning drain),
- rasterize_page (the worker-process entry point, with its document cache),
- render + PNG encode at compress_level=1 (what an engine's prepare step roughly costs when it
  sends PNGs, e.g. the openai engine),
and the peak RSS of the process.
"""

from __future__ import annotations

import argparse
import io
import os
import resource
import time
from collections.abc import Callable
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")

import pymupdf

from hpdparse.sources.open import open_source
from hpdparse.sources.rasterize import close_cached_documents, rasterize_page

CORPUS = Path(__file__).resolve().parents[2] / "shared" / "corpus"
DEFAULT_PDF = CORPUS / "pdfjs__tracemonkey.pdf"


def generated_pdf(path: Path, pages: int = 14) -> Path:
    doc = pymupdf.open()
    words = "hierarchical parallel decoding of document layout with forked branches " * 40
    for _ in range(pages):
        page = doc.new_page(width=612, height=792)
        for column in range(2):
            x = 50 + column * 262
            page.insert_textbox(pymupdf.Rect(x, 60, x + 250, 740), words, fontsize=9)
    doc.save(path)
    return path


def best_rate(fn: Callable[[int], object], numbers: list[int], rounds: int) -> float:
    fn(numbers[0])  # warm-up: fonts, caches
    best = float("inf")
    for _ in range(rounds):
        start = time.perf_counter()
        for number in numbers:
            fn(number)
        best = min(best, time.perf_counter() - start)
    return len(numbers) / best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pdf", type=Path, default=None)
    parser.add_argument("--dpi", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--max-pages", type=int, default=50)
    args = parser.parse_args()

    pdf = args.pdf or (DEFAULT_PDF if DEFAULT_PDF.is_file() else None)
    if pdf is None:
        pdf = generated_pdf(Path("/tmp/hpdparse-bench-rasterize.pdf"))
        print("corpus not found: using a generated 14-page text PDF")
    pymupdf.TOOLS.mupdf_display_errors(False)
    raw = pymupdf.open(pdf)
    source = open_source(pdf)
    numbers = list(range(1, min(source.page_count, args.max_pages) + 1))
    dpi = args.dpi
    sample, _ = source.rasterize(1, dpi)
    print(
        f"{pdf.name}: {len(numbers)} pages, {dpi} dpi, page 1 is {sample.size[0]}x"
        f"{sample.size[1]} px; best of {args.rounds} passes, one process, one thread"
    )

    def mupdf_only(number: int) -> object:
        return raw[number - 1].get_pixmap(dpi=dpi, alpha=False)

    def inputs_render(number: int) -> object:
        return source.rasterize(number, dpi)

    def worker_render(number: int) -> object:
        return rasterize_page(str(pdf), number, dpi)

    def render_and_png(number: int) -> object:
        buffer = io.BytesIO()
        source.rasterize(number, dpi)[0].save(buffer, format="PNG", compress_level=1)
        return buffer

    for label, fn in [
        ("PyMuPDF get_pixmap alone", mupdf_only),
        ("SourceDocument.render", inputs_render),
        ("rasterize_page (worker entry)", worker_render),
        ("render + PNG encode (level 1)", render_and_png),
    ]:
        rate = best_rate(fn, numbers, args.rounds)
        print(f"  {label:32} {rate:7.1f} pages/s  ({1000 / rate:6.1f} ms/page)")
    close_cached_documents()
    source.close()
    raw.close()
    peak_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"  peak RSS {peak_mib:.0f} MiB")


if __name__ == "__main__":
    main()
