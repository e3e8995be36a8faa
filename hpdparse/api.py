"""The Python API: `convert(...)`, `render(...)` and `review(...)`; the command line is a thin
layer over these.

from hpdparse import api
report = api.convert(["paper.pdf"], "out", engine="openai", server="http://host:8118/v1")
print(report.exit_code, report.documents[0].status)   # out/paper/paper.md
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hpdparse.engines.base import Engine, EngineConfig
from hpdparse.engines.openai.options import DEFAULT_SERVER
from hpdparse.engines.options import EngineOptions
from hpdparse.engines.registry import DEFAULT_ENGINE, create_engine
from hpdparse.errors import EngineError
from hpdparse.export.files import check_export_options
from hpdparse.hpd.confidence import DEFAULT_FLAG_BELOW
from hpdparse.hpd.protocol import DEFAULT_MAX_TOKENS, DEFAULT_MODEL
from hpdparse.markdown.render import RenderOptions
from hpdparse.markdown.text_layer import TEXT_LAYER_MODES
from hpdparse.remote import is_url, output_location, set_storage_options
from hpdparse.review.page_images import DEFAULT_MAX_SIDE
from hpdparse.runner.progress import Progress
from hpdparse.runner.render_folders import render_folders
from hpdparse.runner.scheduler import Converter
from hpdparse.runner.settings import (
    AUTO_WORKERS,
    DEFAULT_BATCH_SIZE,
    DEFAULT_DPI,
    ConvertSettings,
)
from hpdparse.sources.discover import discover_inputs
from hpdparse.sources.office import DEFAULT_CONVERT_TIMEOUT
from hpdparse.sources.page_ranges import parse_page_ranges
from hpdparse.store.confidence_report import apply_thresholds
from hpdparse.store.report import DocumentReport, RunReport

if TYPE_CHECKING:
    from hpdparse.review.command import ReviewResult
    from hpdparse.runner.ray.settings import RaySettings


def convert(
    inputs: Sequence[str | Path],
    output_dir: str | Path = ".",
    *,
    engine: str | Engine = DEFAULT_ENGINE,
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
    engine_options: Mapping[str, Any] | EngineOptions | None = None,
    render_options: RenderOptions | None = None,
    layout: bool = False,
    report_path: str | Path | None = None,
    progress: Progress | None = None,
    ray: str | RaySettings | None = None,
    convert_timeout: float = DEFAULT_CONVERT_TIMEOUT,
    keep_converted_pdf: bool = False,
    ray_actors: int = 0,
    ray_cpus_per_actor: float | None = None,
    storage_options: Mapping[str, Any] | None = None,
    flag_below: float | None = DEFAULT_FLAG_BELOW,
    fail_below: float | None = None,
) -> RunReport:
    """Convert PDF, image, EPUB, XPS, Office and HTML files (files, folders, glob patterns;
    docs/inputs.md lists the formats) into `output_dir/<stem>/`.

    `engine` is an engine name (vllm, torch, openai; see `hpdparse.engines.registry`) or an
    `Engine` (then the caller starts and closes it). `engine_options` are the engine's own
    settings, as ``--engine-option`` pairs (checked against its options class, e.g.
    ``{"extra_body": {"skip_special_tokens": False}}`` for openai) or an instance of that class
    (`OpenAIOptions(...)`, `VllmOptions(...)`, `TorchOptions(...)`); `server` is the openai
    engine's URL (with a mapping; the other engines have none). `pages` is a 1-based
    selection such as "1-3,7,10-" (ValueError when invalid). `layout` also writes each
    document's `<stem>.layout.pdf` (a finished document without one is finished again, from its
    saved pages). Office and HTML files are converted to PDF by LibreOffice, each within
    `convert_timeout` seconds; `keep_converted_pdf` keeps that PDF as `<stem>.converted.pdf`.
    Returns the run report; `report.exit_code` is 0, 1 or 130 (see the command line). Raises
    EngineError when the engine cannot be created or started.

    `ray` runs the conversion on a Ray cluster through Ray Data (``"local"``: one started on this
    machine for the run, ``"auto"``: the running one, or an address such as
    ``"ray://head:10001"``, or a `RaySettings` for every knob), with `ray_actors` engine actors
    (0: one per GPU, or one per `ray_cpus_per_actor` CPUs) and `batch_size` pages in flight in
    each; `engine` must then be a name, and inputs and `output_dir` URLs or on a file system
    every node sees. The output, resume and report are those of a run on this machine (plus
    the report's per-actor figures).

    Inputs, `output_dir` and `report_path` may be URLs (s3://bucket/prefix/, gs://, az://,
    https://) with the matching extra installed; `storage_options` go to their fsspec file
    systems (credentials, endpoint_url...) and are never written anywhere.

    `flag_below` lists the pages whose confidence is below it in the report; with `fail_below`,
    such pages count as failed (hpdparse/store/confidence_report.py). `render_options.text_layer`
    "verify" (the default) checks text blocks against the PDF's own text
    (hpdparse/markdown/text_layer.py), "prefer" also takes trusted ones from the file instead of
    decoding them (vllm and torch in fork mode; hpdparse/engines/text_layer.py), "off" neither.

    Pages are rasterized in worker processes started with forkserver (or spawn), which import the
    calling script again: in a script, call this under `if __name__ == "__main__":`.
    """
    if storage_options is not None:
        set_storage_options(dict(storage_options))
    settings = _convert_settings(
        output_dir, pages, dpi, password, batch_size, workers, overwrite, render_options, layout
    )
    if convert_timeout <= 0:
        raise ValueError(f"convert_timeout must be positive, not {convert_timeout}")
    settings.convert_timeout, settings.keep_converted_pdf = convert_timeout, keep_converted_pdf
    config = EngineConfig(
        model=model,
        revision=revision,
        fork=fork,
        mtp=mtp,
        speculative_tokens=speculative_tokens,
        max_tokens=max_tokens,
        device=device,
        dtype=dtype,
    )
    if ray is not None:
        if not isinstance(engine, str):
            raise ValueError("ray= needs an engine name: each Ray actor makes its own engine")
        return _convert_on_ray(
            inputs,
            settings,
            ray,
            ray_actors,
            ray_cpus_per_actor,
            engine=engine,
            config=config,
            engine_options=engine_options,
            server=server,
            recursive=recursive,
            report_path=report_path,
            progress=progress,
            thresholds=(flag_below, fail_below),
        )
    owns_engine = isinstance(engine, str)
    if isinstance(engine, str):
        try:
            engine = create_engine(engine, config, engine_options, server=server)
        except EngineError as exc:
            if report_path is not None:
                _engine_failure_report(inputs, recursive, str(exc)).write(report_path)
            raise
    sources, errors = discover_inputs([str(i) for i in inputs], recursive=recursive)
    converter = Converter(engine, settings, progress, start_engine=owns_engine)
    report = converter.run(sources, errors)
    apply_thresholds(report, flag_below, fail_below)
    if report_path is not None:
        report.write(report_path)
    return report


def _convert_settings(
    output_dir: str | Path,
    pages: str | None,
    dpi: int,
    password: str | None,
    batch_size: int,
    workers: int,
    overwrite: bool,
    render_options: RenderOptions | None,
    layout: bool,
) -> ConvertSettings:
    """`convert`'s arguments checked (ValueError, UsageError) and gathered for the runners."""
    if dpi < 1:
        raise ValueError(f"dpi must be positive, not {dpi}")
    if batch_size < 1:
        raise ValueError(f"batch size must be at least 1, not {batch_size}")
    render_options = render_options or RenderOptions()
    check_export_options(render_options)
    if render_options.text_layer not in TEXT_LAYER_MODES:
        modes = ", ".join(TEXT_LAYER_MODES)
        raise ValueError(f"text_layer must be one of {modes}, not {render_options.text_layer!r}")
    return ConvertSettings(
        output_dir=output_location(output_dir),
        pages=parse_page_ranges(pages),
        dpi=dpi,
        password=password,
        batch_size=batch_size,
        workers=workers,
        overwrite=overwrite,
        render_options=render_options,
        layout=layout,
    )


def _convert_on_ray(
    inputs: Sequence[str | Path],
    settings: ConvertSettings,
    address: str | RaySettings,
    actors: int,
    cpus_per_actor: float | None,
    *,
    engine: str,
    config: EngineConfig,
    engine_options: Mapping[str, Any] | EngineOptions | None,
    server: str,
    recursive: bool,
    report_path: str | Path | None,
    progress: Progress | None,
    thresholds: tuple[float | None, float | None],
) -> RunReport:
    # Imported here: plain convert never loads the Ray runner (nor Ray).
    from hpdparse.runner.ray.driver import RayConverter
    from hpdparse.runner.ray.settings import DEFAULT_CPUS_PER_ACTOR, RaySettings

    if isinstance(address, RaySettings):
        ray_settings = address
    else:
        ray_settings = RaySettings(
            address=address,
            actors=actors,
            cpus_per_actor=(
                cpus_per_actor if cpus_per_actor is not None else DEFAULT_CPUS_PER_ACTOR
            ),
        )
    try:
        converter = RayConverter(
            engine,
            config,
            settings,
            ray_settings,
            options=engine_options,
            server=server,
            progress=progress,
        )
    except EngineError as exc:
        if report_path is not None:
            _engine_failure_report(inputs, recursive, str(exc)).write(report_path)
        raise
    sources, errors = discover_inputs([str(i) for i in inputs], recursive=recursive)
    report = converter.run(sources, errors)
    apply_thresholds(report, *thresholds)
    if report_path is not None:
        report.write(report_path)
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
    layout: bool = False,
    report_path: str | Path | None = None,
    progress: Progress | None = None,
    flag_below: float | None = DEFAULT_FLAG_BELOW,
    fail_below: float | None = None,
) -> RunReport:
    """Rebuild `.md`, `.json` and `images/` of converted document folders from their `raw/`
    pages and their source file (path recorded in `raw/document.json`), without a model;
    `layout` also writes `<stem>.layout.pdf`."""
    options = render_options or RenderOptions()
    check_export_options(options)
    folders = [output_location(d) for d in doc_dirs]
    report = render_folders(folders, options, password, progress, layout=layout)
    apply_thresholds(report, flag_below, fail_below)
    if report_path is not None:
        report.write(report_path)
    return report


def review(
    out: str | Path,
    *,
    password: str | None = None,
    image_size: int = DEFAULT_MAX_SIDE,
    open_browser: bool = False,
    output_dir: str | Path | None = None,
) -> ReviewResult:
    """Write a self-contained HTML review page per document folder of the run in `out`
    (`OUT/<stem>/<stem>.review.html`: page images with boxes beside the rendered blocks) and an
    index (`OUT/review.html`); `out` may also be one document folder. Needs no model: reads
    what `convert` wrote and the source files (`password` for encrypted ones). `image_size` is
    the longest side of the embedded page images. Problems (a source moved away...) are in
    `result.problems`, one line each; OutputError when `out` holds no output folder.

    `out` may be a URL (s3://bucket/prefix/): its document folders (their .md, .json, images/
    and raw/) are then copied into the local folder `output_dir` (required), where the review
    pages are written."""
    from hpdparse.review.command import review as write_review_pages

    if is_url(str(out)):
        if output_dir is None:
            raise ValueError(f"{out}: reviewing a URL needs a local output folder (-o)")
        from hpdparse.store.fsspec_folder import copy_tree

        copy_tree(str(out), Path(output_dir))
        out = Path(output_dir)
    result = write_review_pages(Path(out), password=password, max_side=image_size)
    if open_browser:
        import webbrowser

        target = result.index or (result.pages[0] if result.pages else None)
        if target is not None:
            webbrowser.open(target.absolute().as_uri())
    return result
