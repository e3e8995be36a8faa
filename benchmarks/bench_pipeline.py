"""Host side of the pipeline on one core: rasterize + prepare a page for the engine, pages/s.

Usage: .venv/bin/python benchmarks/bench_pipeline.py [--pdf FILE] [--dpi 200] [--pages 40]

Default PDF: the shared corpus' pdfjs__tracemonkey.pdf (14 pages, a two-column paper) when present,
and always a generated text PDF (--pages pages of two text columns). For each, pages/s of:
- inline: rasterize_page + the engine's preparer in one loop (one core, no pipeline), run inside a
  rasterizer process so that it has the workers' malloc settings (without them glibc returns each
  page's ~10 MB buffers to the kernel, and faulting them back in costs up to 40%),
- pipeline: the pipeline's own path, one rasterizer process (`--workers 1`) with its read-ahead,
  the main process only receiving payloads (what `hpdparse convert --workers 1` feeds an engine);
for two preparers: `png` (the openai engine: PNG bytes) and `tiles` (vllm/torch: HPD tiles, uint8,
one channel for a grey page), with the mean payload per page that crosses the pipe.
Pages per CPU-second (this process and its rasterizer, user + system) is printed beside the wall
rate: on a shared machine it is the figure that does not depend on the other jobs.
`--stages` also prints where a tiles page's time goes (ms/page, inline, one thread): render,
grey check, the two bicubic resizes, the cut into tiles, and the payload's pickle round trip.
Target: >= 25 pages/s at 200 dpi for ordinary text pages.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import os
import pickle
import time
from collections import deque
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np
import psutil
import pymupdf
from PIL import Image

from hpdparse.engines.openai.page_png import encode_page_png
from hpdparse.hpd.tiling import (
    TilingConfig,
    _as_hwc,
    _grey_band,
    assemble_tiles,
    grid_image_size,
    select_grid,
    tile_image,
)
from hpdparse.runner.workers import WorkerPool, prepare_page
from hpdparse.sources.rasterize import close_cached_documents, rasterize_page

CORPUS = Path(__file__).resolve().parents[2] / "shared" / "corpus"
TRACEMONKEY = CORPUS / "pdfjs__tracemonkey.pdf"


def generated_pdf(path: Path, pages: int) -> Path:
    doc = pymupdf.open()
    words = "hierarchical parallel decoding of document layout with forked branches " * 40
    for n in range(pages):
        page = doc.new_page(width=612, height=792)
        page.insert_text((50, 45), f"Page {n + 1}", fontsize=14)
        for column in range(2):
            x = 50 + column * 262
            page.insert_textbox(pymupdf.Rect(x, 60, x + 250, 740), words, fontsize=9)
    doc.save(path)
    doc.close()
    return path


def cpu_seconds() -> float:
    """CPU time of this process and its children (the rasterizer processes), user + system."""
    me = psutil.Process()
    total = sum(me.cpu_times()[:2])
    for child in me.children(recursive=True):
        with contextlib.suppress(psutil.Error):
            total += sum(child.cpu_times()[:2])
    return total


def _inline_loop(pdf: Path, pages: list[int], dpi: int, prepare) -> tuple[float, float]:
    close_cached_documents()
    prepare(rasterize_page(str(pdf), pages[0], dpi)[0])  # warm-up
    start, cpu = time.perf_counter(), time.process_time()
    for number in pages:
        prepare(rasterize_page(str(pdf), number, dpi)[0])
    return len(pages) / (time.perf_counter() - start), len(pages) / (time.process_time() - cpu)


def inline_rate(pdf: Path, pages: list[int], dpi: int, prepare) -> tuple[float, float]:
    pool = WorkerPool(1, prepare)
    try:
        return pool.submit(_inline_loop, pdf, pages, dpi, prepare).result()
    finally:
        pool.shutdown()


def pipeline_rate(
    pdf: Path, pages: list[int], dpi: int, prepare, read_ahead: int = 4
) -> tuple[float, float, float]:
    """Pages/s, pages per CPU-second, mean MB of payload per page."""
    pool = WorkerPool(1, prepare)
    try:
        pool.submit(prepare_page, str(pdf), pages[0], dpi, None).result()  # start + warm-up
        start, cpu = time.perf_counter(), cpu_seconds()
        window: deque = deque()
        todo = iter(pages)
        done = 0
        payload_bytes = 0
        while True:
            while len(window) < read_ahead:
                number = next(todo, None)
                if number is None:
                    break
                window.append(pool.submit(prepare_page, str(pdf), number, dpi, None))
            if not window:
                break
            result = window.popleft().result()
            assert not isinstance(result, str), result
            payload = result.payload
            payload_bytes += payload.nbytes if isinstance(payload, np.ndarray) else len(payload)
            done += 1
        wall, cpu_used = time.perf_counter() - start, cpu_seconds() - cpu
        return done / wall, done / cpu_used, payload_bytes / done / 1e6
    finally:
        pool.shutdown()


def stage_times(pdf: Path, pages: list[int], dpi: int, tiling: TilingConfig) -> dict[str, float]:
    """ms/page of each step of the tiles preparer (the steps of tile_image, timed one by one)."""
    totals: dict[str, float] = {}

    def clock(name: str, start: float) -> float:
        now = time.perf_counter()
        totals[name] = totals.get(name, 0.0) + (now - start) * 1e3
        return now

    close_cached_documents()
    rasterize_page(str(pdf), pages[0], dpi)  # warm-up: open the document
    greys = 0
    for number in pages:
        t = time.perf_counter()
        image, _ = rasterize_page(str(pdf), number, dpi)
        t = clock("render", t)
        band = _grey_band(image)
        greys += band is not None
        source = band or image
        t = clock("grey check", t)
        grid = select_grid(image.width, image.height, tiling)
        resized = _as_hwc(source.resize(grid_image_size(grid, tiling), Image.Resampling.BICUBIC))
        t = clock("resize to grid", t)
        size = (tiling.tile_size, tiling.tile_size)
        thumbnail = _as_hwc(source.resize(size, Image.Resampling.BICUBIC))
        t = clock("resize thumbnail", t)
        tiles = assemble_tiles(resized, grid, thumbnail)
        t = clock("cut into tiles", t)
        pickle.loads(pickle.dumps(tiles, protocol=pickle.DEFAULT_PROTOCOL))
        clock("pickle round trip", t)
    per_page = {name: total / len(pages) for name, total in totals.items()}
    per_page["grey pages (count)"] = greys
    return per_page


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pdf", type=Path, action="append")
    parser.add_argument("--dpi", type=int, default=200)
    parser.add_argument("--pages", type=int, default=40, help="pages of the generated PDF")
    parser.add_argument("--stages", action="store_true", help="also time each step of tiling")
    args = parser.parse_args()
    pymupdf.TOOLS.mupdf_display_errors(False)
    pdfs = list(args.pdf or [])
    if not pdfs:
        if TRACEMONKEY.is_file():
            pdfs.append(TRACEMONKEY)
        pdfs.append(generated_pdf(Path("/tmp/hpdparse-bench-pipeline.pdf"), args.pages))
    preparers = {
        "png": encode_page_png,
        "tiles": functools.partial(tile_image, config=TilingConfig()),
    }
    print(f"dpi {args.dpi}, one core (OMP_NUM_THREADS=1, one rasterizer process)")
    for pdf in pdfs:
        with pymupdf.open(pdf) as doc:
            pages = list(range(1, doc.page_count + 1))
        size = rasterize_page(str(pdf), 1, args.dpi)[0].size
        print(f"{pdf.name}: {len(pages)} pages, page 1 is {size[0]}x{size[1]} px")
        for name, prepare in preparers.items():
            inline = inline_rate(pdf, pages, args.dpi, prepare)
            piped = pipeline_rate(pdf, pages, args.dpi, prepare)
            print(
                f"  {name:<6} inline {inline[0]:6.1f} pages/s ({inline[1]:6.1f} per CPU-second)"
                f"   pipeline, 1 worker {piped[0]:6.1f} pages/s ({piped[1]:6.1f} per CPU-second)"
                f"   {piped[2]:5.2f} MB/page"
            )
        if args.stages:
            stages = stage_times(pdf, pages, args.dpi, TilingConfig())
            greys = int(stages.pop("grey pages (count)"))
            print(f"  tiles, ms/page by step ({greys} of {len(pages)} pages grey):")
            for name, ms in stages.items():
                print(f"    {name:<20} {ms:6.2f}")
            print(f"    {'total':<20} {sum(stages.values()):6.2f}")


if __name__ == "__main__":
    main()
