"""Where a block is on its page: its box on the model's 0-1000 grid turned into page coordinates
(PDF points; pixels of the page image for image inputs)."""

from __future__ import annotations

from dataclasses import dataclass

from hpdparse.hpd.stream import ParsedPage

GRID = 1000.0  # the model's box grid


@dataclass(frozen=True)
class Frame:
    """A page's frame: its size in the exports' coordinates."""

    width: float  # in PDF points, or pixels when the input has no PDF page size
    height: float
    in_points: bool
    dpi: int  # of the page image the model saw (72 when unknown)

    def box(self, grid_box: tuple[int, int, int, int]) -> tuple[float, float, float, float]:
        """A 0-1000 grid box -> (left, top, right, bottom) on the page, origin top left, clamped to
        the page."""
        x1, y1, x2, y2 = (min(max(v, 0.0), GRID) for v in grid_box)
        sx, sy = self.width / GRID, self.height / GRID
        return (x1 * sx, y1 * sy, x2 * sx, y2 * sy)


def page_frames(pages: list[ParsedPage]) -> dict[int, Frame]:
    """The converted (not failed) pages with a usable size, by number."""
    frames: dict[int, Frame] = {}
    for page in pages:
        if page.status != "ok":
            continue
        in_points = bool(page.width_pt and page.height_pt)
        width = page.width_pt if in_points else page.width_px
        height = page.height_pt if in_points else page.height_px
        if width and height:
            frames[page.number] = Frame(width, height, in_points, page.dpi or 72)
    return frames
