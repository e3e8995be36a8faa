"""Peak host memory of a long conversion: a generated N-page PDF (default 2,000 pages) through
`hpdparse convert --engine openai --batch-size 512` against the local fake HPD server.

Usage: .venv/bin/python benchmarks/bench_memory.py [--pages 2000] [--dpi 200] [--batch-size 512]
                                                   [--workers 0] [--delay 0.0]

The conversion runs as a subprocess; its process tree (the main process and the rasterizer
processes) is sampled every 50 ms. Printed: peak RSS of the main process, peak of the sum over the
tree, wall time, pages/s, and the most requests the server saw open at once. The fake server runs
in this process, so its memory is not counted. `--delay` makes the server slow, so that the
engine really holds `--batch-size` pages in flight (with an instant server it rarely does).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil
import pymupdf

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.helpers.fakeserver import FakeHPDServer  # noqa: E402


def generated_pdf(path: Path, pages: int) -> Path:
    """A text PDF whose pages all differ (page number and a varying line)."""
    doc = pymupdf.open()
    words = "streaming conversion of very long documents keeps memory bounded " * 12
    for n in range(1, pages + 1):
        page = doc.new_page(width=595, height=842)
        page.insert_text((72, 60), f"Page {n} of {pages}", fontsize=16)
        page.insert_textbox(pymupdf.Rect(72, 90, 523, 500), words, fontsize=10)
        page.insert_text((72, 520 + (n % 200)), "#" * (n % 50 + 1), fontsize=8)
    doc.save(path, garbage=3, deflate=True)
    doc.close()
    return path


def tree_rss(proc: psutil.Process) -> tuple[int, int]:
    """RSS of the process and the sum over it and its descendants, in bytes."""
    try:
        main = proc.memory_info().rss
        total = main
        for child in proc.children(recursive=True):
            with contextlib.suppress(psutil.Error):
                total += child.memory_info().rss
        return main, total
    except psutil.Error:
        return 0, 0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pages", type=int, default=2000)
    parser.add_argument("--dpi", type=int, default=200)
    parser.add_argument("--batch-size", type=int, default=512)
    parser.add_argument("--workers", type=int, default=0)
    parser.add_argument("--delay", type=float, default=0.0)
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="hpdparse-bench-memory-") as tmp:
        pdf = generated_pdf(Path(tmp) / "long.pdf", args.pages)
        out = Path(tmp) / "out"
        report = Path(tmp) / "report.json"
        with FakeHPDServer(delay=args.delay) as server:
            cmd = [
                sys.executable,
                "-m",
                "hpdparse",
                "convert",
                str(pdf),
                "-o",
                str(out),
                "--engine",
                "openai",
                "--server",
                server.url,
                "--dpi",
                str(args.dpi),
                "--batch-size",
                str(args.batch_size),
                "--workers",
                str(args.workers),
                "--report",
                str(report),
                "--quiet",
            ]
            started = time.perf_counter()
            child = subprocess.Popen(cmd, cwd=REPO)
            proc = psutil.Process(child.pid)
            peak_main = peak_total = 0
            while child.poll() is None:
                main_rss, total = tree_rss(proc)
                peak_main, peak_total = max(peak_main, main_rss), max(peak_total, total)
                time.sleep(0.05)
            wall = time.perf_counter() - started
            max_open = server.max_concurrent
        data = json.loads(report.read_text())
    mib = 1 << 20
    print(
        f"{args.pages} pages at {args.dpi} dpi, --batch-size {args.batch_size}, "
        f"server delay {args.delay} s: exit {child.returncode}, {wall:.1f} s, "
        f"{data['totals']['pages_decoded']} pages decoded "
        f"({data['totals']['pages_decoded'] / wall:.1f} pages/s)"
    )
    print(
        f"peak RSS: main process {peak_main / mib:.0f} MiB; main + rasterizers "
        f"{peak_total / mib:.0f} MiB; most requests open at the server: {max_open}"
    )


if __name__ == "__main__":
    main()
