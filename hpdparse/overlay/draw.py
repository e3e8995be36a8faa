"""Drawing on a layout overlay page with PyMuPDF: block boxes with their tags, the status band
under the page, the legend under the first page. Everything is vector; text is Helvetica."""

from __future__ import annotations

from collections.abc import Iterable

from hpdparse.hpd.stream import FLAG_TRUNCATED, Block
from hpdparse.overlay.roles import is_container, rgb, role_name
from hpdparse.sources.mupdf import pymupdf

FONT = "helv"
WHITE = (1.0, 1.0, 1.0)
BLACK = (0.0, 0.0, 0.0)
BAND_GREY = (0.93, 0.93, 0.93)
FAILED_RED = (0.80, 0.10, 0.10)
TRUNCATED_ORANGE = (0.93, 0.50, 0.05)
CONTAINER_DASHES = "[4 2] 0"
FILL_OPACITY = 0.10
LEGEND_NOTE = (
    "solid box: a forked child branch (the block's content)   dashed box: a container the "
    "layout branch wrote without one (image, list)   tag: reading order and label"
)


class Metrics:
    """Sizes for a page `width` points wide: text, line widths, band height."""

    def __init__(self, width: float) -> None:
        self.font_size = min(max(width / 70, 5.0), 11.0)
        self.tag_size = self.font_size * 0.8
        self.line_width = min(max(width / 600, 0.5), 2.0)
        self.band_height = self.font_size * 2.2


def _length(text: str, size: float) -> float:
    """The width of `text` in Helvetica at `size`, in points."""
    return pymupdf.get_text_length(text, fontname=FONT, fontsize=size)


def _write(
    target: pymupdf.Page | pymupdf.Shape,
    point: tuple[float, float],
    text: str,
    size: float,
    colour: tuple[float, float, float],
) -> None:
    target.insert_text(point, text, fontname=FONT, fontsize=size, color=colour)


def latin1(text: str) -> str:
    """Helvetica draws Latin-1 only: anything else becomes '?'."""
    return text.encode("latin-1", "replace").decode("latin-1")


def draw_blocks(page: pymupdf.Page, blocks: list[Block], sx: float, sy: float) -> None:
    """Each block's box in its role's colour (dashed for containers), then the tags on top."""
    m = Metrics(page.rect.width)
    shape = page.new_shape()
    placed = []
    for block in blocks:
        if block.bbox_px is None:
            continue
        x1, y1, x2, y2 = block.bbox_px
        rect = pymupdf.Rect(x1 * sx, y1 * sy, x2 * sx, y2 * sy)  # in page points
        colour = rgb(block.role)
        container = is_container(block)
        shape.draw_rect(rect)
        shape.finish(
            color=colour,
            fill=None if container else colour,
            fill_opacity=FILL_OPACITY,
            width=m.line_width,
            dashes=CONTAINER_DASHES if container else None,
        )
        placed.append((block, rect, colour))
    for block, rect, colour in placed:
        _tag(shape, block, rect, colour, m)
    shape.commit()


def _tag(
    shape: pymupdf.Shape,
    block: Block,
    rect: pymupdf.Rect,
    colour: tuple[float, float, float],
    m: Metrics,
) -> None:
    label = block.label or role_name(block.role)
    text = latin1(f"{block.index} {label[:24]}")
    if FLAG_TRUNCATED in block.flags:
        text += " (cut)"
    size = m.tag_size
    width = _length(text, size) + size * 0.6
    height = size * 1.3
    top = rect.y0 - height if rect.y0 - height >= 0 else rect.y0
    tag = pymupdf.Rect(rect.x0, top, rect.x0 + width, top + height)
    shape.draw_rect(tag)
    shape.finish(color=None, fill=colour, fill_opacity=0.85, width=0)
    _write(shape, (tag.x0 + size * 0.3, tag.y1 - size * 0.32), text, size, WHITE)


def mark_page(page: pymupdf.Page, content: pymupdf.Rect, status: str) -> None:
    """A failed page gets a red frame and wash, a truncated one an orange dashed frame."""
    m = Metrics(content.width)
    shape = page.new_shape()
    shape.draw_rect(content)
    if status == "failed":
        shape.finish(color=FAILED_RED, fill=FAILED_RED, fill_opacity=0.08, width=m.line_width * 4)
    else:
        shape.finish(color=TRUNCATED_ORANGE, width=m.line_width * 4, dashes="[8 4] 0")
    shape.commit()


def draw_band(page: pymupdf.Page, top: float, text: str, status: str) -> None:
    """The status line under the page content."""
    m = Metrics(page.rect.width)
    band = pymupdf.Rect(0, top, page.rect.width, top + m.band_height)
    background = {"failed": FAILED_RED, "truncated": TRUNCATED_ORANGE}.get(status, BAND_GREY)
    page.draw_rect(band, color=None, fill=background, width=0)
    size = m.font_size
    line = fitted(latin1(text), page.rect.width - 2 * size, size)
    colour = BLACK if background == BAND_GREY else WHITE
    _write(page, (size, top + m.band_height * 0.5 + size * 0.35), line, size, colour)


def fitted(text: str, width: float, size: float) -> str:
    """`text` cut (with an ellipsis) to fit `width` points at `size`."""
    if _length(text, size) <= width:
        return text
    while text and _length(text + "...", size) > width:
        text = text[: max(len(text) - 8, 0)]
    return text + "..."


def legend_layout(
    roles: Iterable[str], width: float
) -> tuple[list[tuple[float, float, str]], float]:
    """Where each role's swatch goes under the page: [(x, row, role)] and the legend's height."""
    m = Metrics(width)
    size = m.font_size
    x, row, placed = size, 0, []
    for role in roles:
        item = size * 1.6 + _length(role_name(role), size)
        if x + item > width - size and x > size:
            x, row = size, row + 1
        placed.append((x, row, role))
        x += item + size
    note_rows = 2 if _length(LEGEND_NOTE, size) > width - 2 * size else 1
    return placed, (row + 1 + note_rows) * size * 1.7 + size


def draw_legend(page: pymupdf.Page, top: float, roles: list[str]) -> None:
    """Role colours and the box conventions, under the first page's band."""
    m = Metrics(page.rect.width)
    size = m.font_size
    placed, height = legend_layout(roles, page.rect.width)
    page.draw_rect(pymupdf.Rect(0, top, page.rect.width, top + height), color=None, fill=WHITE)
    shape = page.new_shape()
    for x, row, role in placed:
        y = top + size * 0.8 + row * size * 1.7
        swatch = pymupdf.Rect(x, y, x + size * 1.2, y + size)
        shape.draw_rect(swatch)
        shape.finish(color=rgb(role), fill=rgb(role), fill_opacity=0.35, width=m.line_width)
        _write(shape, (x + size * 1.6, y + size * 0.85), role_name(role), size, BLACK)
    shape.commit()
    rows = placed[-1][1] + 1 if placed else 0  # rows are placed in order
    note = pymupdf.Rect(
        size, top + size * 0.8 + rows * size * 1.7, page.rect.width - size, top + height
    )
    page.insert_textbox(note, LEGEND_NOTE, fontname=FONT, fontsize=size * 0.9, color=BLACK)
