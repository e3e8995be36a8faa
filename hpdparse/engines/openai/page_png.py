"""Page images as PNG for the wire, encoded for speed (the openai engine's payload)."""

from __future__ import annotations

import struct
import zlib

from PIL import Image

_PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def encode_page_png(image: Image.Image) -> bytes:
    """The page as PNG bytes, encoded for speed: no row filters, zlib level 1.

    Pillow's encoder spends most of its time choosing row filters; for rendered pages (mostly
    flat background) unfiltered rows at level 1 are about as small and take half the time.
    Transparent images are flattened onto white; every other mode becomes RGB (or stays L).
    """
    image = _flatten(image)
    width, height = image.size
    channels = 1 if image.mode == "L" else 3
    pixels = memoryview(image.tobytes())
    stride = width * channels
    rows = bytearray((stride + 1) * height)  # each row: filter byte 0 (none), then the pixels
    for y in range(height):
        start = y * (stride + 1) + 1
        rows[start : start + stride] = pixels[y * stride : (y + 1) * stride]
    color_type = 0 if channels == 1 else 2
    header = struct.pack(">IIBBBBB", width, height, 8, color_type, 0, 0, 0)
    return b"".join(
        (
            _PNG_SIGNATURE,
            _png_chunk(b"IHDR", header),
            _png_chunk(b"IDAT", zlib.compress(rows, 1)),
            _png_chunk(b"IEND", b""),
        )
    )


def _flatten(image: Image.Image) -> Image.Image:
    if image.mode in ("RGB", "L"):
        return image
    if image.mode in ("RGBA", "LA", "PA") or "transparency" in image.info:  # transparent
        rgba = image.convert("RGBA")
        background = Image.new("RGBA", rgba.size, (255, 255, 255, 255))
        return Image.alpha_composite(background, rgba).convert("RGB")
    return image.convert("RGB")


def _png_chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
