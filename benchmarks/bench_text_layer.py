"""The PDF's own text layer (--text-layer): what prefer saves, what verify costs, how robust the
box extraction is. Prints figures; asserts nothing.

- prefer: the samples (born-digital, the tiny checkpoint reads them right) converted with
  ``--text-layer off`` and ``prefer`` on one engine: child tokens decoded, the share of child
  tokens taken from the file instead, pages/s (engine time), and whether each Markdown is the same.
- verify: the text layer's cost per page (read the words, check every text block of the page)
  on shared-corpus PDFs, next to a run's time per page with verify and with off.
- jitter: PyMuPDF's own text blocks on shared-corpus PDFs, each box edge moved at random by up to
  a few percent of the box's size: how often the extracted text is still trusted and still
  matches the block's text (similarity >= 0.9), and how often a moved box is trusted yet wrong.

    .venv/bin/python benchmarks/bench_text_layer.py [--engine vllm] [--sections prefer,jitter]
        [--repeats 3]
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")

import pymupdf

from hpdparse import api
from hpdparse.hpd.stream import Block
from hpdparse.markdown.render import RenderOptions
from hpdparse.markdown.text_layer import AGREE, verify_page
from hpdparse.runner.progress import Progress
from hpdparse.sources.text_layer import box_text, page_text, read_page_texts, similarity

REPO = Path(__file__).resolve().parents[1]
TINY = REPO / "tests" / "fixtures" / "tiny-hpd"
SAMPLES = [REPO / "samples" / f"{s}.pdf" for s in ("paper", "report", "memo")]
CORPUS = REPO.parent / "shared" / "corpus"
BORN_DIGITAL = [
    "pdfjs__tracemonkey.pdf",
    "plumber__federal-register-2020-17221.pdf",
    "plumber__issue-316-example.pdf",
    "plumber__issue-982-example.pdf",
    "pdfminer__issue-00352-asw-oct96-p41.pdf",
    "pymupdf__test-3820.pdf",
]


def convert(engine: str, mode: str, out: Path):
    options = RenderOptions(text_layer=mode)
    return api.convert(
        SAMPLES, out, engine=engine, model=str(TINY), render_options=options, progress=Progress()
    )


def prefer_section(engine: str, repeats: int) -> None:
    print(f"== prefer vs off: {len(SAMPLES)} sample PDFs, {engine} engine, tiny checkpoint")
    with tempfile.TemporaryDirectory() as tmp:
        runs = {}
        speeds: dict[str, list[float]] = {"off": [], "prefer": []}
        convert(engine, "off", Path(tmp) / "warm-up")  # the first run in a process warms up
        for attempt in range(repeats):  # alternating, so that other work slows both alike
            for mode in ("off", "prefer"):
                started = time.perf_counter()
                report = convert(engine, mode, Path(tmp) / f"{mode}-{attempt}")
                runs[mode] = (report, time.perf_counter() - started, attempt)
                speeds[mode].append(report.pages_per_second)
        off, prefer = runs["off"][0], runs["prefer"][0]
        decoded_off = off.stats.get("child_tokens", 0)
        from_file = prefer.stats.get("file_tokens", 0)
        decoded_prefer = prefer.stats.get("child_tokens", 0) - from_file
        print(f"child tokens decoded: off {decoded_off:.0f}, prefer {decoded_prefer:.0f}")
        print(f"  child tokens from the file: {from_file / max(decoded_off, 1):.1%} of off's")
        print(
            f"  children from the file: {prefer.stats.get('file_children', 0):.0f} of "
            f"{prefer.stats.get('forks', 0):.0f} forks"
        )
        print(
            f"  all output tokens decoded: off {off.output_tokens}, prefer "
            f"{prefer.output_tokens - from_file:.0f}"
        )
        print(
            f"  decoding steps: off {off.stats.get('decoding_steps', 0):.0f}, "
            f"prefer {prefer.stats.get('decoding_steps', 0):.0f}"
        )
        for mode, (report, wall, _) in runs.items():
            print(
                f"{mode}: {report.pages_per_second:.2f} pages/s (engine time "
                f"{report.engine_seconds:.2f} s for {report.pages_decoded} pages), {wall:.1f} s"
            )
        print(
            f"pages/s, median of {repeats}: off {statistics.median(speeds['off']):.2f}, "
            f"prefer {statistics.median(speeds['prefer']):.2f}"
        )
        for sample in SAMPLES:
            md = [
                (Path(tmp) / f"{m}-{a}" / sample.stem / f"{sample.stem}.md").read_bytes()
                for m, (_, _, a) in runs.items()
            ]
            print(f"  {sample.name}: Markdown {'same' if md[0] == md[1] else 'DIFFERS'}")


def corpus_pages(limit: int) -> list[pymupdf.Page]:
    pages = []
    for name in BORN_DIGITAL:
        path = CORPUS / name
        if path.is_file():
            doc = pymupdf.open(path)
            pages += [doc[i] for i in range(min(limit, doc.page_count))]
    return pages


def text_blocks(page: pymupdf.Page) -> list[tuple[tuple[int, int, int, int], str]]:
    """PyMuPDF's text blocks of at least 5 words, as grid boxes with their text."""
    w, h = page.rect.width, page.rect.height
    out = []
    for x0, y0, x1, y1, text, _, kind in page.get_text("blocks", flags=pymupdf.TEXTFLAGS_TEXT):
        if kind == 0 and len(text.split()) >= 5:
            box = (x0 / w * 1000, y0 / h * 1000, x1 / w * 1000, y1 / h * 1000)
            out.append((box, " ".join(text.split())))
    return out


def grid_box(box: tuple[float, ...]) -> tuple[int, int, int, int]:
    x0, y0, x1, y1 = box
    return (max(0, int(x0)), max(0, int(y0)), min(1000, int(x1) + 1), min(1000, int(y1) + 1))


def verify_section(pages: list[pymupdf.Page], engine: str) -> None:
    print(f"== verify cost: {len(pages)} corpus pages")
    # The blocks to check (PyMuPDF's own, standing in for the model's), made before timing.
    by_file: dict[str, dict[int, list[Block]]] = {}
    for page in pages:
        by_file.setdefault(page.parent.name, {})[page.number + 1] = [
            Block(i, "text", "text", grid_box(b), t) for i, (b, t) in enumerate(text_blocks(page))
        ]
    blocks = sum(len(found) for pages_of in by_file.values() for found in pages_of.values())
    # Timed: what a document's finish does, open the source again, read the pages' words,
    # check every text block.
    started = time.perf_counter()
    for path, pages_of in by_file.items():
        texts = read_page_texts(path, pages_of)
        for number, found in pages_of.items():
            verify_page(found, texts[number], [None] * len(found))
    per_page = (time.perf_counter() - started) / max(1, len(pages))
    print(
        f"read + check: {per_page * 1000:.1f} ms a page ({blocks / max(1, len(pages)):.0f} "
        "text blocks a page)"
    )
    with tempfile.TemporaryDirectory() as tmp:
        convert(engine, "off", Path(tmp) / "warm-up")  # the first run in a process warms up
        for run, mode in enumerate(("off", "verify", "off", "verify")):
            started = time.perf_counter()
            report = convert(engine, mode, Path(tmp) / f"{mode}-{run}")
            wall = time.perf_counter() - started
            print(
                f"{mode}: {report.pages_decoded} sample pages in {wall:.2f} s "
                f"({wall / max(1, report.pages_decoded) * 1000:.0f} ms a page, {engine})"
            )
    print("(on the vendor's A800 figures a page decodes in ~370 ms: 2.68 pages/s)")


def jitter_section(pages: list[pymupdf.Page], shares: list[float], seed: int) -> None:
    blocks = [(page_text(p), box, t) for p in pages for box, t in text_blocks(p)]
    print(f"== jitter: {len(blocks)} PyMuPDF text blocks on {len(pages)} corpus pages")
    rng = random.Random(seed)
    for share in shares:
        trusted = match = wrong = 0
        reasons: dict[str, int] = {}
        for text, box, expected in blocks:
            bw, bh = box[2] - box[0], box[3] - box[1]
            moved = (
                box[0] + rng.uniform(-share, share) * bw,
                box[1] + rng.uniform(-share, share) * bh,
                box[2] + rng.uniform(-share, share) * bw,
                box[3] + rng.uniform(-share, share) * bh,
            )
            found = box_text(text, grid_box(moved))
            agrees = similarity(found.text, expected) >= AGREE
            trusted += found.trusted
            if found.reason:
                reasons[found.reason] = reasons.get(found.reason, 0) + 1
            match += found.trusted and agrees
            wrong += found.trusted and not agrees
        n = max(1, len(blocks))
        print(
            f"edges moved up to {share:.0%}: trusted {trusted / n:.1%}, trusted and matching "
            f"{match / n:.1%}, trusted but not matching {wrong / n:.1%}"
        )
        print("  not trusted: " + ", ".join(f"{r} {c}" for r, c in sorted(reasons.items())))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--engine", default="vllm", choices=["vllm", "torch"])
    parser.add_argument("--sections", default="prefer,verify,jitter")
    parser.add_argument("--pages", type=int, default=3, help="corpus pages per PDF")
    parser.add_argument("--seed", type=int, default=36)
    parser.add_argument("--repeats", type=int, default=3, help="alternating off/prefer runs")
    args = parser.parse_args()
    sections = args.sections.split(",")
    pages = corpus_pages(args.pages) if {"verify", "jitter"} & set(sections) else []
    if not pages and {"verify", "jitter"} & set(sections):
        print(f"(the shared corpus is absent: {CORPUS})", file=sys.stderr)
    if "prefer" in sections:
        prefer_section(args.engine, args.repeats)
    if "verify" in sections and pages:
        verify_section(pages, args.engine)
    if "jitter" in sections and pages:
        jitter_section(pages, [0.0, 0.02, 0.05], args.seed)


if __name__ == "__main__":
    main()
