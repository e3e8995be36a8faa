"""Page preparers for rasterizer-pool tests (module-level, so worker processes can unpickle them:
test modules themselves are not importable there)."""

from __future__ import annotations

import os

from PIL import Image


def page_size(image: Image.Image) -> tuple[int, int]:
    return image.size


class CrashOnWidePages:
    """Kill the worker process (as a MuPDF crash would) on pages wider than `width` pixels."""

    def __init__(self, width: int) -> None:
        self.width = width

    def __call__(self, image: Image.Image) -> tuple[int, int]:
        if image.width > self.width:
            os._exit(3)
        return image.size
