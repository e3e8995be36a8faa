"""The settings of a conversion run (everything but the engine) and their defaults, which the
command line and the Python API share."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from hpdparse.engines.base import Engine, EngineInfo
from hpdparse.markdown.render import RenderOptions
from hpdparse.sources.office import DEFAULT_CONVERT_TIMEOUT
from hpdparse.sources.page_ranges import PageRanges

DEFAULT_DPI = 200
"""Resolution pages are rasterized at (an A4 page then gets HPD's finest tiling, 4x6 tiles)."""

DEFAULT_BATCH_SIZE = 512
"""Pages in the engine at once (`Engine.run`'s max_in_flight), across documents."""

AUTO_WORKERS = 0
"""`workers` value meaning one rasterizer process per CPU core, at most MAX_AUTO_WORKERS."""

MAX_AUTO_WORKERS = 8

READ_AHEAD_PER_WORKER = 4
"""Pages rasterized ahead of the engine per rasterizer process, when `read_ahead` is 0."""

DEFAULT_RASTERIZE_TIMEOUT = 300.0
"""Seconds one page may take to be rasterized and prepared before it fails."""

TEXT_LAYER_PREFER = "prefer"


@dataclass
class ConvertSettings:
    """Everything about a conversion run except the engine."""

    output_dir: Path | str  # a local folder or a URL (s3://bucket/prefix)
    pages: PageRanges = field(default_factory=PageRanges)
    dpi: int = DEFAULT_DPI
    password: str | None = None
    batch_size: int = DEFAULT_BATCH_SIZE
    workers: int = AUTO_WORKERS  # rasterizer processes
    read_ahead: int = 0  # pages rasterized ahead of the engine; 0 = READ_AHEAD_PER_WORKER each
    overwrite: bool = False
    rasterize_timeout: float = DEFAULT_RASTERIZE_TIMEOUT
    render_options: RenderOptions = field(default_factory=RenderOptions)
    layout: bool = False  # also write <stem>.layout.pdf (hpdparse.overlay.layout_pdf)
    convert_timeout: float = DEFAULT_CONVERT_TIMEOUT  # seconds LibreOffice may take per file
    keep_converted_pdf: bool = False  # Office/HTML inputs: keep <stem>.converted.pdf

    def worker_count(self) -> int:
        if self.workers > 0:
            return self.workers
        return max(1, min(os.cpu_count() or 1, MAX_AUTO_WORKERS))

    def read_ahead_count(self) -> int:
        return (
            self.read_ahead if self.read_ahead > 0 else READ_AHEAD_PER_WORKER * self.worker_count()
        )


def text_layer_info(
    engine: Engine, settings: ConvertSettings, notice: Callable[[str], None]
) -> EngineInfo:
    """What produces this run's raw pages: the engine's info, marked "prefer" when children
    are answered from the text layer (--text-layer prefer, in fork mode on vllm or torch: part
    of the reuse key). Elsewhere prefer falls back to verify, with a one-line `notice`."""
    info = engine.info
    if settings.render_options.text_layer != TEXT_LAYER_PREFER:
        return info
    if not (engine.answers_from_text_layer and engine.config.fork):
        how = f"the {engine.name} engine" + ("" if engine.config.fork else " with --no-fork")
        notice(f"--text-layer prefer needs fork mode on vllm or torch; {how} verifies instead")
        return info
    return dataclasses.replace(info, text_layer=TEXT_LAYER_PREFER)
