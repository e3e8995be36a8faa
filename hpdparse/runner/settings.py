"""The settings of a conversion run (everything but the engine: `ConvertSettings`) and of what
a run's report gets at its end (`ReportSettings`), declared once with their command-line flags,
help and defaults (hpdparse.settings): the command line and the Python API read them here."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from hpdparse.engines.base import Engine, EngineInfo
from hpdparse.hpd.confidence import DEFAULT_FLAG_BELOW
from hpdparse.markdown.render import RenderOptions
from hpdparse.settings import TextLayerMode, setting
from hpdparse.sources.office import DEFAULT_CONVERT_TIMEOUT
from hpdparse.sources.page_ranges import PageRanges, parse_page_ranges
from hpdparse.store.confidence_report import apply_thresholds
from hpdparse.store.report import RunReport

DEFAULT_BATCH_SIZE = 512
"""Pages in the engine at once (`Engine.run`'s max_in_flight), across documents."""

MAX_AUTO_WORKERS = 8

READ_AHEAD_PER_WORKER = 4
"""Pages rasterized ahead of the engine per rasterizer process, when `read_ahead` is 0."""

DEFAULT_RASTERIZE_TIMEOUT = 300.0
"""Seconds one page may take to be rasterized and prepared before it fails."""


@dataclass
class ConvertSettings:
    """Everything about a conversion run except the engine. `pages` may be given as text
    ("1-3,7,10-"); a bad value is a ValueError."""

    output_dir: Path | str  # a local folder or a URL (s3://bucket/prefix)
    pages: PageRanges = setting(
        PageRanges(),
        "Pages to convert, 1-based: 1-3,7,10- (10 to the end). Default: all.",
        flag="--pages",
        metavar="RANGES",
        parse=parse_page_ranges,
        show_default=False,
    )
    # 200 dpi: an A4 page gets HPD's finest tiling, 4x6 tiles.
    dpi: int = setting(
        200,
        "Resolution pages are rasterized at (very large pages are rasterized at less).",
        flag="--dpi",
        low=10,
        high=1200,
    )
    password: str | None = setting(
        None, "Password for encrypted PDFs (ignored for the others).", flag="--password"
    )
    batch_size: int = setting(
        DEFAULT_BATCH_SIZE,
        "Pages decoded at once (in flight), across documents.",
        flag="--batch-size",
        low=1,
    )
    workers: int = setting(  # 0: one per CPU core, at most MAX_AUTO_WORKERS
        0,
        "Processes rasterizing pages ahead of the engine. Default: one per CPU core (max "
        f"{MAX_AUTO_WORKERS}).",
        flag="--workers",
        low=0,
        show_default=False,
    )
    read_ahead: int = 0  # pages rasterized ahead of the engine; 0 = READ_AHEAD_PER_WORKER each
    overwrite: bool = setting(
        False,
        "Skip documents already converted with the same settings and resume unfinished ones "
        "(reusing saved pages), or redo everything.",
        flag="--skip-existing/--overwrite",
        negate=True,
    )
    rasterize_timeout: float = DEFAULT_RASTERIZE_TIMEOUT
    render_options: RenderOptions = field(default_factory=RenderOptions)
    layout: bool = setting(  # hpdparse.overlay.layout_pdf
        False,
        "Also write <stem>.layout.pdf: every page with each block's box in its role's colour, "
        "its reading-order number and label; failed and truncated pages marked.",
        flag="--layout",
    )
    convert_timeout: float = setting(
        DEFAULT_CONVERT_TIMEOUT,
        "Office and HTML inputs: seconds LibreOffice may take to convert one to PDF.",
        flag="--convert-timeout",
        low=0,
        low_open=True,
        metavar="SECONDS",
    )
    keep_converted_pdf: bool = setting(
        False,
        "Office and HTML inputs: keep the PDF LibreOffice made as <stem>.converted.pdf.",
        flag="--keep-converted-pdf",
    )

    def __post_init__(self) -> None:
        if not isinstance(self.pages, PageRanges):
            self.pages = parse_page_ranges(self.pages)
        if self.dpi < 1:
            raise ValueError(f"dpi must be positive, not {self.dpi}")
        if self.batch_size < 1:
            raise ValueError(f"batch size must be at least 1, not {self.batch_size}")
        if self.convert_timeout <= 0:
            raise ValueError(f"convert_timeout must be positive, not {self.convert_timeout}")

    def worker_count(self, cpus: float | None = None) -> int:
        """--workers, or one rasterizer process per CPU core (`cpus`: those a Ray actor
        reserved), at most MAX_AUTO_WORKERS."""
        if self.workers > 0:
            return self.workers
        return max(1, min(int(cpus or os.cpu_count() or 1), MAX_AUTO_WORKERS))

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
    if settings.render_options.text_layer != TextLayerMode.PREFER:
        return info
    if not (engine.answers_from_text_layer and engine.config.fork):
        how = f"the {engine.name} engine" + ("" if engine.config.fork else " with --no-fork")
        notice(f"--text-layer prefer needs fork mode on vllm or torch; {how} verifies instead")
        return info
    return dataclasses.replace(info, text_layer=TextLayerMode.PREFER)


@dataclass
class ReportSettings:
    """What a run's report gets at its end (convert and render): the pages flagged or failed
    for their confidence (store/confidence_report.py), and where it is written."""

    report_path: str | Path | None = None
    flag_below: float | None = setting(
        DEFAULT_FLAG_BELOW,
        "List the pages whose confidence is below this in the summary and the report.",
        flag="--flag-below",
        low=0,
        high=1,
    )
    fail_below: float | None = setting(
        None,
        "Pages whose confidence is below this count as failed (exit code 1).",
        flag="--fail-below",
        low=0,
        high=1,
    )

    def close(self, report: RunReport) -> RunReport:
        """`report` with the thresholds applied, written to `report_path` if there is one."""
        apply_thresholds(report, self.flag_below, self.fail_below)
        if self.report_path is not None:
            report.write(self.report_path)
        return report
