"""The Python API: `convert(...)` and `render(...)`; the command line is a thin layer over these.

from hpdparse import api
report = api.convert(["paper.pdf"], "out", engine="openai", server="http://host:8118/v1")
print(report.exit_code, report.documents[0].status)   # out/paper/paper.md
"""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from hpdparse.engines import ENGINE_NAMES, Engine, EngineConfig, create_engine
from hpdparse.errors import EngineError
from hpdparse.hpd.protocol import DEFAULT_MAX_TOKENS, DEFAULT_MODEL
from hpdparse.markdown.render import RenderOptions
from hpdparse.runner.progress import Progress
from hpdparse.runner.render_folders import render_folders
from hpdparse.runner.scheduler import Converter, dependency_error
from hpdparse.runner.settings import (
    AUTO_WORKERS,
    DEFAULT_BATCH_SIZE,
    DEFAULT_DPI,
    ConvertSettings,
)
from hpdparse.sources.discover import discover_inputs
from hpdparse.sources.page_ranges import parse_page_ranges
from hpdparse.store.report import DocumentReport, RunReport

DEFAULT_SERVER = "http://127.0.0.1:8118/v1"


# The third-party module each heavy engine cannot run without: checked before the engine is
# built, so a missing install is reported as such (not as a later, less clear failure).
_ENGINE_MODULES = {"vllm": "vllm", "torch": "torch"}


def _importable(module: str) -> bool:
    if module in sys.modules:
        return sys.modules[module] is not None
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def make_engine(name: str, config: EngineConfig) -> Engine:
    """Create engine `name`; a missing optional dependency becomes a one-line EngineError."""
    if name not in ENGINE_NAMES:
        raise EngineError(f"unknown engine {name!r}; choose one of {', '.join(ENGINE_NAMES)}")
    needed = _ENGINE_MODULES.get(name)
    if needed and not _importable(needed):
        raise dependency_error(name, ModuleNotFoundError(name=needed))
    try:
        return create_engine(name, config)
    except ImportError as exc:
        raise dependency_error(name, exc) from None


def convert(
    inputs: Sequence[str | Path],
    output_dir: str | Path = ".",
    *,
    engine: str | Engine = "vllm",
    model: str = DEFAULT_MODEL,
    revision: str | None = None,
    server: str = DEFAULT_SERVER,
    recursive: bool = False,
    pages: str | None = None,
    dpi: int = DEFAULT_DPI,
    password: str | None = None,
    batch_size: int = DEFAULT_BATCH_SIZE,
    workers: int = AUTO_WORKERS,
    overwrite: bool = False,
    fork: bool = True,
    mtp: bool = True,
    speculative_tokens: int = 6,
    max_tokens: int = DEFAULT_MAX_TOKENS,
    device: str | None = None,
    dtype: str | None = None,
    engine_options: Mapping[str, Any] | None = None,
    render_options: RenderOptions | None = None,
    report_path: str | Path | None = None,
    progress: Progress | None = None,
) -> RunReport:
    """Convert PDF and image files (files, folders, glob patterns) into `output_dir/<stem>/`.

    `engine` is an engine name (vllm, torch, openai) or an `Engine` (then the caller starts and
    closes it). `engine_options` are engine-specific settings (`EngineConfig.extra`, e.g.
    ``{"extra_body": {"skip_special_tokens": False}}`` for openai). `pages` is a 1-based
    selection such as "1-3,7,10-" (ValueError when invalid). Returns the run report;
    `report.exit_code` is 0, 1 or 130 (see the command line). Raises EngineError when the
    engine cannot be created or started.

    Pages are rasterized in worker processes started with forkserver (or spawn), which import the
    calling script again: in a script, call this under `if __name__ == "__main__":`.
    """
    if dpi < 1:
        raise ValueError(f"dpi must be positive, not {dpi}")
    if batch_size < 1:
        raise ValueError(f"batch size must be at least 1, not {batch_size}")
    ranges = parse_page_ranges(pages)
    settings = ConvertSettings(
        output_dir=Path(output_dir),
        pages=ranges,
        dpi=dpi,
        password=password,
        batch_size=batch_size,
        workers=workers,
        overwrite=overwrite,
        render_options=render_options or RenderOptions(),
    )
    owns_engine = isinstance(engine, str)
    if isinstance(engine, str):
        config = EngineConfig(
            model=model,
            revision=revision,
            server=server,
            fork=fork,
            mtp=mtp,
            speculative_tokens=speculative_tokens,
            max_tokens=max_tokens,
            device=device,
            dtype=dtype,
            extra=dict(engine_options or {}),
        )
        try:
            engine = make_engine(engine, config)
        except EngineError as exc:
            if report_path is not None:
                _engine_failure_report(inputs, recursive, str(exc)).write(Path(report_path))
            raise
    sources, errors = discover_inputs([str(i) for i in inputs], recursive=recursive)
    converter = Converter(engine, settings, progress, start_engine=owns_engine)
    report = converter.run(sources, errors)
    if report_path is not None:
        report.write(Path(report_path))
    return report


def _engine_failure_report(inputs: Sequence[str | Path], recursive: bool, error: str) -> RunReport:
    """The report of a run that could not start: every input failed with the engine's error."""
    sources, errors = discover_inputs([str(i) for i in inputs], recursive=recursive)
    report = RunReport(command="convert", engine_error=error)
    for input_error in errors:
        source = input_error.path if input_error.path is not None else str(input_error)
        report.documents.append(DocumentReport(source=source, error=str(input_error)))
    for src in sources:
        report.documents.append(DocumentReport(source=str(src), error=error))
    return report


def render(
    doc_dirs: Sequence[str | Path],
    *,
    password: str | None = None,
    render_options: RenderOptions | None = None,
    report_path: str | Path | None = None,
    progress: Progress | None = None,
) -> RunReport:
    """Rebuild `.md`, `.json` and `images/` of converted document folders from their `raw/`
    pages and their source file (path recorded in `raw/document.json`), without a model."""
    report = render_folders(
        [Path(d) for d in doc_dirs], render_options or RenderOptions(), password, progress
    )
    if report_path is not None:
        report.write(Path(report_path))
    return report
