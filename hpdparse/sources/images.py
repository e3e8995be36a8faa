"""Image files (PNG, JPEG, TIFF) through Pillow: frames as pages, any mode normalised to RGB."""

from __future__ import annotations

import io
import math
import warnings
from pathlib import Path
from typing import BinaryIO

from PIL import Image, ImageOps, UnidentifiedImageError

from hpdparse.sources.document import (
    IMAGE_FORMATS,
    Content,
    PageGeometry,
    SourceDocument,
    capped_scale,
    one_line_error,
)


class ImageDocument(SourceDocument):
    """A PNG, JPEG or TIFF file; every frame of a multi-frame TIFF is a page."""

    kind = "image"

    def __init__(self, path: Path, content: Content = None) -> None:
        """`content`: what to open instead of the file at `path` (`document.Content`)."""
        self.path = path
        self._image: Image.Image | None = None
        if isinstance(content, bytes):
            self._file: BinaryIO = io.BytesIO(content)
        else:
            self._file = open(content or path, "rb")  # noqa: SIM115 - kept open for TIFF frames
        failure: str | None = None
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", Image.DecompressionBombWarning)
                self._image = Image.open(self._file)
        except UnidentifiedImageError:
            failure = "not a PDF or supported image"
        except Image.DecompressionBombError as error:
            failure = f"image too large ({one_line_error(error)})"
        except Exception as error:
            failure = f"image cannot be read: {one_line_error(error)}"
        if failure is None and self._image is not None and self._image.format not in IMAGE_FORMATS:
            failure = f"{self._image.format} images are not supported (PNG, JPEG or TIFF)"
        if failure is not None or self._image is None:
            self.close()
            raise self._error(failure)
        self.page_count = getattr(self._image, "n_frames", 1) if self._image.format == "TIFF" else 1

    def rasterize(self, number: int, dpi: int) -> tuple[Image.Image, PageGeometry]:
        """The image (frame `number` of a TIFF) as RGB, upright per EXIF, scaled down to the size
        limits; `dpi` is not used (images are taken as they are)."""
        self._check_number(number)
        image = self._image
        assert image is not None
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                if self.page_count > 1:
                    image.seek(number - 1)
                target = _capped_size(image.size)
                if target != image.size and image.format == "JPEG":
                    image.draft("RGB", target)  # decode at 1/2, 1/4 or 1/8 scale when it can
                image.load()
                rgb = _to_rgb(ImageOps.exif_transpose(image))
                target = _capped_size(rgb.size)
                if target != rgb.size:
                    rgb = rgb.resize(target, Image.Resampling.LANCZOS, reducing_gap=3.0)
        except Exception as error:
            raise self._page_error(number, one_line_error(error)) from None
        return rgb, PageGeometry(rgb.width, rgb.height)

    def close(self) -> None:
        if self._image is not None:
            self._image.close()
            self._image = None
        if not self._file.closed:
            self._file.close()


def _capped_size(size: tuple[int, int]) -> tuple[int, int]:
    width, height = size
    scale = capped_scale(width, height, 1.0, upscale=False)
    if scale >= 1.0:
        return size
    return max(1, math.floor(width * scale)), max(1, math.floor(height * scale))


def _to_rgb(image: Image.Image) -> Image.Image:
    """Any Pillow mode to RGB: transparency on white, 16/32-bit and float grey scaled to 8 bits."""
    mode = image.mode
    if mode == "RGB":
        return image
    if mode == "P":
        image = image.convert("RGBA" if "transparency" in image.info else "RGB")
        mode = image.mode
    if mode in ("RGBA", "LA", "PA", "RGBa", "La"):
        rgba = image.convert("RGBA")
        background = Image.new("RGBA", rgba.size, (255, 255, 255, 255))
        return Image.alpha_composite(background, rgba).convert("RGB")
    if mode.startswith("I") or mode == "F":
        grey = image.convert("F") if mode == "F" else image.convert("I")
        low, high = grey.getextrema()
        if high > 255:
            top = 65535 if high <= 65535 else high
            grey = grey.point(lambda v: v * (255 / top))
        elif mode == "F" and high <= 1.0:
            grey = grey.point(lambda v: v * 255)
        return grey.convert("L").convert("RGB")
    return image.convert("RGB")
