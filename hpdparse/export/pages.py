"""Where a block is on its page: its box on the model's 0-1000 grid (from `<stem>.json`) turned
into page coordinates (PDF points; pixels of the page image for image inputs)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, NamedTuple

GRID = 1000.0  # the model's box grid


@dataclass(frozen=True)
class PageGeometry:
    number: int
    width: float  # in PDF points, or pixels when the input has no PDF page size
    height: float
    in_points: bool
    dpi: int  # of the page image the model saw (72 when unknown)

    def box(self, grid_box: list[float]) -> tuple[float, float, float, float]:
        """A 0-1000 grid box -> (left, top, right, bottom) on the page, origin top left, clamped to
        the page."""
        x1, y1, x2, y2 = (min(max(v, 0.0), GRID) for v in grid_box)
        sx, sy = self.width / GRID, self.height / GRID
        return (x1 * sx, y1 * sy, x2 * sx, y2 * sy)


class BlockRef(NamedTuple):
    """A block of `<stem>.json`: its page and its index there (a tuple, hashed in C: it keys
    every lookup of the export)."""

    page: int
    block: int


def page_geometries(document_json: dict[str, Any]) -> dict[int, PageGeometry]:
    """The converted (not failed) pages with a usable size, by number."""
    pages: dict[int, PageGeometry] = {}
    for page in document_json["pages"]:
        if page["status"] != "ok":
            continue
        in_points = bool(page.get("width_pt") and page.get("height_pt"))
        width = page["width_pt"] if in_points else page["width_px"]
        height = page["height_pt"] if in_points else page["height_px"]
        if width and height:
            dpi = page.get("dpi") or 72
            pages[page["number"]] = PageGeometry(page["number"], width, height, in_points, dpi)
    return pages


def blocks_by_ref(document_json: dict[str, Any]) -> dict[BlockRef, dict[str, Any]]:
    return {
        BlockRef(page["number"], block["index"]): block
        for page in document_json["pages"]
        for block in page["blocks"]
    }
