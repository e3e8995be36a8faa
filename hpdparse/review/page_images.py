"""Page images for the review pages: the page rasterized as the model saw it (same source, same
dpi), scaled down and embedded as a JPEG data URL so each page file stands alone."""

from __future__ import annotations

import base64
import io

from PIL import Image

from hpdparse.sources.rasterize import rasterize_page

DEFAULT_MAX_SIDE = 1400  # pixels on the longest side of an embedded page image
JPEG_QUALITY = 80


def page_image(
    source: str, number: int, dpi: int, password: str | None, max_side: int = DEFAULT_MAX_SIDE
) -> tuple[str, int, int]:
    """Page `number` of `source` rasterized at `dpi` (as convert did), as a data URL, and its
    width and height as the model saw it (the boxes' pixel grid); raises InputError."""
    image = rasterize_page(source, number, dpi, password)[0]
    width, height = image.size
    if max(width, height) > max_side:
        scale = max_side / max(width, height)
        size = (max(1, round(width * scale)), max(1, round(height * scale)))
        image = image.resize(size, Image.Resampling.LANCZOS)
    buffer = io.BytesIO()
    image.save(buffer, format="JPEG", quality=JPEG_QUALITY, optimize=True)
    encoded = base64.b64encode(buffer.getvalue()).decode("ascii")
    return f"data:image/jpeg;base64,{encoded}", width, height
