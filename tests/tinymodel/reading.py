"""Random "reading pages" with exact ground truth: the pages tiny-hpd-reader learns to read.

A reading page is a square PDF page (PAGE_PT points a side) ruled, invisibly, into GRID x GRID
cells. It holds one to MAX_BLOCKS text blocks, each on its own row of cells: a random string of
MIN_CHARS-MAX_CHARS digits, one glyph (Helvetica Bold, its size and place jittered a little) per
cell. The tiny model's tile is 112 px and its vision tokens (patch 14, pixel-shuffled by 0.5) are
4 x 4 cells of 28 px a tile. A page of TILES x TILES tiles (rendered at 1.5 times the tiles' size,
which the tiler keeps at TILES x TILES: one tile and no thumbnail for TILES = 1) has GRID = 4 *
TILES cells a side, so one glyph lies under one vision token, large enough to survive the model's
resolution (about 18 px tall in the tile) and small enough that blur and noise make it ambiguous.

The ground truth is exact by construction: a block's box is its row of cells on the HPD 0-1000
grid, and its content the string drawn. Streams use the grammar of tests/tinymodel/synth.py
(`format_stream`). Digits are one token each in the tiny tokenizer (its pre-tokenizer splits
digits one by one), so a misread glyph is one token with its own probability.

Pages are drawn from a seed (`reading_page`); the same seed gives the same page, image included.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

import pymupdf
from PIL import Image

from tests.tinymodel.synth import BOLD, Block, format_stream

TILES = 1
GRID = 4 * TILES
PAGE_PT = 112.0 * TILES
CELL = PAGE_PT / GRID
RENDER_DPI = 108  # 1.5 px a point: 168 * TILES px a side
ALPHABET = "0123456789"
MIN_CHARS, MAX_CHARS = 2, 4
MAX_BLOCKS = 4
LABEL = "text"
GRID_STEP = 1000 // GRID


@dataclass(frozen=True)
class ReadingPage:
    seed: str
    blocks: tuple[Block, ...]
    stream: str
    image: Image.Image  # grey, RENDER_DPI


def random_blocks(rng: random.Random) -> list[tuple[int, int, str]]:
    """(row, first column, text) of each block, top to bottom."""
    rows = sorted(rng.sample(range(GRID), rng.randint(1, MAX_BLOCKS)))
    out = []
    for row in rows:
        n = rng.randint(MIN_CHARS, MAX_CHARS)
        col = rng.randint(0, GRID - n)
        out.append((row, col, "".join(rng.choice(ALPHABET) for _ in range(n))))
    return out


def block_of(row: int, col: int, text: str) -> Block:
    """The ground-truth block: its row of cells on the 0-1000 grid, and its text."""
    box = (col * GRID_STEP, row * GRID_STEP, (col + len(text)) * GRID_STEP, (row + 1) * GRID_STEP)
    return Block(LABEL, box, text, (text,))


def render(placed: list[tuple[int, int, str]], rng: random.Random) -> Image.Image:
    """The page image: each glyph centred in its cell, size and place jittered by `rng`."""
    doc = pymupdf.open()
    try:
        page = doc.new_page(width=PAGE_PT, height=PAGE_PT)
        font = pymupdf.Font(BOLD)
        for row, col, text in placed:
            for i, ch in enumerate(text):
                size = rng.uniform(20.0, 25.0)
                width = font.text_length(ch, fontsize=size)
                x = (col + i) * CELL + (CELL - width) / 2 + rng.uniform(-1.5, 1.5)
                # Cap height of Helvetica is about 0.72 em: centre the digit vertically.
                y = row * CELL + (CELL + 0.72 * size) / 2 + rng.uniform(-1.5, 1.5)
                page.insert_text((x, y), ch, fontsize=size, fontname=BOLD)
        pix = page.get_pixmap(dpi=RENDER_DPI, colorspace=pymupdf.csGRAY, alpha=False)
        return Image.frombytes("L", (pix.width, pix.height), pix.samples)
    finally:
        doc.close()


def reading_page(seed: str) -> ReadingPage:
    """The reading page drawn from `seed` (any string; the same string, the same page)."""
    rng = random.Random(f"reading-page/{seed}")
    placed = random_blocks(rng)
    blocks = tuple(block_of(*p) for p in placed)
    return ReadingPage(seed, blocks, format_stream(blocks), render(placed, rng))


def cell_classes(page: ReadingPage) -> list[int]:
    """What each cell holds, row by row: 0 for nothing, 1 + d for the digit d."""
    cells = [0] * (GRID * GRID)
    for block in page.blocks:
        row, col = block.bbox[1] // GRID_STEP, block.bbox[0] // GRID_STEP
        for i, ch in enumerate(block.content or ""):
            cells[row * GRID + col + i] = 1 + ALPHABET.index(ch)
    return cells
