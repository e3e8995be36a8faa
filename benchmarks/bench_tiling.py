"""Time HPD tiling of real A4 pages rendered at 200 DPI: ms/page on one thread.

Usage: .venv/bin/python benchmarks/bench_tiling.py [--pdf FILE --page N] [--dpi 200] [--repeat 20]

By default times two A4 pages of the shared corpus, one with colour (pdfjs__TAMReview.pdf p1) and
one pure grey (plumber__issue-90-example.pdf p1): tile_image resizes a grey page as one band and
returns its tiles as one channel, (N, t, t, 1). Without the corpus it renders a generated A4 page of
text. Prints the tiles' size and median and best ms for tile_image alone, with the 3-channel
expansion a grey page's tiles had before (tile_image + expand_grey), and with normalize_torch (on
CPU, when torch is installed), then rasterise + tile two ways:
render at the DPI and tile_image (bit-identical to the released preprocessing), or render straight
at the grid's pixel size plus a 448 px thumbnail render and assemble_tiles (no resampling at all;
not bit-identical: text is rendered sharper than bicubic upsampling makes it).
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from collections.abc import Callable
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np
import pymupdf
from PIL import Image

from hpdparse.hpd.tiling import (
    DEFAULT_CONFIG,
    assemble_tiles,
    expand_grey,
    grid_image_size,
    normalize_torch,
    select_grid,
    tile_image,
)

CORPUS = Path(__file__).resolve().parents[2] / "shared" / "corpus"
DEFAULT_PAGES = [
    ("colour", CORPUS / "pdfjs__TAMReview.pdf", 1),
    ("grey", CORPUS / "plumber__issue-90-example.pdf", 1),
]


def generated_a4() -> pymupdf.Document:
    doc = pymupdf.open()
    page = doc.new_page(width=595, height=842)
    words = "hierarchical parallel decoding of document layout with forked branches " * 12
    for i in range(14):
        y = 60 + i * 52
        page.insert_textbox(pymupdf.Rect(50, y, 545, y + 48), words, fontsize=8)
        page.draw_line((50, y + 49), (545, y + 49), color=(0.8, 0.1, 0.1))
    return doc


def render(doc: pymupdf.Document, page_no: int, dpi: int) -> Image.Image:
    pix = doc[page_no - 1].get_pixmap(dpi=dpi, alpha=False, colorspace=pymupdf.csRGB)
    return Image.frombytes("RGB", (pix.width, pix.height), pix.samples)


def timed(fn: Callable[[], object], repeat: int) -> tuple[float, float]:
    fn()  # warm-up
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append((time.perf_counter() - start) * 1e3)
    return statistics.median(times), min(times)


def bench_page(label: str, image: Image.Image, dpi: int, repeat: int) -> None:
    cols, rows = select_grid(*image.size)
    tiles = tile_image(image)
    print(
        f"{label} at {dpi} DPI: {image.width}x{image.height} px -> grid {cols}x{rows}, "
        f"{tiles.shape[0]} tiles of {tiles.shape[1]} px, {tiles.shape[3]} channel(s), "
        f"{tiles.nbytes / 1e6:.1f} MB"
    )
    cases: list[tuple[str, Callable[[], object]]] = [
        ("tile_image", lambda: tile_image(image)),
        ("tile_image + expand_grey (3 channels)", lambda: expand_grey(tile_image(image))),
    ]
    try:
        import torch

        torch.set_num_threads(1)
        cases.append(
            ("tile_image + normalize_torch (cpu f32)", lambda: normalize_torch(tile_image(image)))
        )
    except ImportError:
        pass
    for name, fn in cases:
        median, best = timed(fn, repeat)
        print(f"  {name:40s} {median:6.1f} ms/page median  ({best:.1f} best)")


def render_and_tile(page: pymupdf.Page, dpi: int) -> np.ndarray:
    return tile_image(render(page.parent, page.number + 1, dpi))


def render_at_grid_size(page: pymupdf.Page, dpi: int) -> np.ndarray:
    """Rasterise straight at the tiles' pixel size: the resampling step disappears."""
    width_pt, height_pt = page.rect.width, page.rect.height
    grid = select_grid(round(width_pt * dpi / 72), round(height_pt * dpi / 72))
    width, height = grid_image_size(grid)
    pix = page.get_pixmap(
        matrix=pymupdf.Matrix(width / width_pt, height / height_pt), colorspace=pymupdf.csRGB
    )
    resized = np.frombuffer(pix.samples_mv, np.uint8).reshape(height, width, 3)
    if grid == (1, 1):
        return assemble_tiles(resized, grid)
    t = DEFAULT_CONFIG.tile_size
    thumb_pix = page.get_pixmap(
        matrix=pymupdf.Matrix(t / width_pt, t / height_pt), colorspace=pymupdf.csRGB
    )
    thumbnail = np.frombuffer(thumb_pix.samples_mv, np.uint8).reshape(t, t, 3)
    return assemble_tiles(resized, grid, thumbnail)


def bench_rasterise(label: str, page: pymupdf.Page, dpi: int, repeat: int) -> None:
    exact = render_and_tile(page, dpi)
    direct = render_at_grid_size(page, dpi)
    diff = np.abs(exact.astype(np.int16) - direct).mean()
    print(
        f"{label}: rasterise + tile ({exact.shape[0]} tiles; mean |difference| {diff:.2f} levels)"
    )
    for name, fn in [
        (f"render {dpi} DPI + tile_image", lambda: render_and_tile(page, dpi)),
        ("render at grid size + assemble_tiles", lambda: render_at_grid_size(page, dpi)),
    ]:
        median, best = timed(fn, repeat)
        print(f"  {name:40s} {median:6.1f} ms/page median  ({best:.1f} best)")


def main() -> None:
    parser = argparse.ArgumentParser(description="Time HPD tiling of rendered PDF pages.")
    parser.add_argument("--pdf", type=Path, help="time this PDF's page instead of the defaults")
    parser.add_argument("--page", type=int, default=1, help="1-based page number for --pdf")
    parser.add_argument("--dpi", type=int, default=200)
    parser.add_argument("--repeat", type=int, default=20)
    args = parser.parse_args()

    print(f"one thread, {args.repeat} runs per figure")
    if args.pdf:
        pages = [(f"{args.pdf.name} p{args.page}", pymupdf.open(args.pdf), args.page)]
    elif all(path.is_file() for _, path, _ in DEFAULT_PAGES):
        pages = [(f"{kind}: {p.name} p{n}", pymupdf.open(p), n) for kind, p, n in DEFAULT_PAGES]
    else:
        pages = [("generated A4 page (shared corpus not found)", generated_a4(), 1)]
    for label, doc, page_no in pages:
        bench_page(label, render(doc, page_no, args.dpi), args.dpi, args.repeat)
    for label, doc, page_no in pages:
        bench_rasterise(label, doc[page_no - 1], args.dpi, args.repeat)


if __name__ == "__main__":
    main()
