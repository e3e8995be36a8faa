"""The Python API: `convert(...)`, `render(...)` and `review(...)`; the command line is a thin
layer over these.

from hpdparse import api
report = api.convert(["paper.pdf"], "out", engine="openai", server="http://host:8118/v1")
print(report.exit_code, report.documents[0].status)   # out/paper/paper.md
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hpdparse.engines.base import Engine
from hpdparse.engines.openai.options import DEFAULT_SERVER
from hpdparse.engines.options import EngineConfig, EngineOptions
from hpdparse.engines.registry import DEFAULT_ENGINE, create_engine
from hpdparse.errors import EngineError
from hpdparse.export.files import check_export_options
from hpdparse.markdown.render import RenderOptions
from hpdparse.remote import is_url, output_location, set_storage_options
from hpdparse.review.page_images import DEFAULT_MAX_SIDE
from hpdparse.runner.progress import Progress
from hpdparse.runner.render_folders import render_folders
from hpdparse.runner.scheduler import Converter
from hpdparse.runner.settings import ConvertSettings, ReportSettings
from hpdparse.settings import share_out
from hpdparse.sources.discover import discover_inputs
from hpdparse.store.report import DocumentReport, RunReport

if TYPE_CHECKING:
    from hpdparse.review.command import ReviewResult
    from hpdparse.runner.ray.driver import RayConverter
    from hpdparse.runner.ray.settings import RaySettings


def convert(
    inputs: Sequence[str | Path],
    output_dir: str | Path = ".",
    *,
    engine: str | Engine = DEFAULT_ENGINE,
    engine_options: Mapping[str, Any] | EngineOptions | None = None,
    render_options: RenderOptions | None = None,
    recursive: bool = False,
    progress: Progress | None = None,
    ray: str | RaySettings | None = None,
    storage_options: Mapping[str, Any] | None = None,
    server: str = DEFAULT_SERVER,
    **settings: Any,
) -> RunReport:
    """Convert PDF, image, EPUB, XPS, Office and HTML files (files, folders, glob patterns;
    docs/inputs.md lists the formats) into `output_dir/<stem>/`.

    `settings` are the command line's options by their names in the classes that declare them
    (hpdparse.settings): those of `ConvertSettings` (``pages="1-3,7,10-"``, ``dpi``,
    ``password``, ``batch_size``, ``workers``, ``overwrite``, ``layout``, ``convert_timeout``,
    ``keep_converted_pdf``...), of `EngineConfig` (``model``, ``revision``, ``fork``, ``mtp``,
    ``speculative_tokens``, ``max_tokens``, ``device``, ``dtype``) and of `ReportSettings`
    (``report_path``, ``flag_below``, ``fail_below``); an unknown name is a TypeError, a bad
    value a ValueError. `layout` also writes each document's `<stem>.layout.pdf` (a finished
    document without one is finished again, from its saved pages). Office and HTML files are
    converted to PDF by LibreOffice, each within `convert_timeout` seconds;
    `keep_converted_pdf` keeps that PDF as `<stem>.converted.pdf`.

    `engine` is an engine name (vllm, torch, openai; see `hpdparse.engines.registry`) or an
    `Engine` (then the caller starts and closes it). `engine_options` are the engine's own
    settings, as ``--engine-option`` pairs (checked against its options class, e.g.
    ``{"extra_body": {"skip_special_tokens": False}}`` for openai) or an instance of that class
    (`OpenAIOptions(...)`, `VllmOptions(...)`, `TorchOptions(...)`); `server` is the openai
    engine's URL (with a mapping; the other engines have none). Returns the run report;
    `report.exit_code` is 0, 1 or 130 (see the command line). Raises EngineError when the engine
    cannot be created or started.

    `ray` runs the conversion on a Ray cluster through Ray Data (``"local"``: one started on this
    machine for the run, ``"auto"``: the running one, or an address such as
    ``"ray://head:10001"``, or a `RaySettings` for every knob: engine actors, CPUs each), with
    `batch_size` pages in flight in each actor; `engine` must then be a name, and inputs and
    `output_dir` URLs or on a file system every node sees. The output, resume and report are
    those of a run on this machine (plus the report's per-actor figures).

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
    run, engine_config, report = share_out(settings, ConvertSettings, EngineConfig, ReportSettings)
    render_options = render_options or RenderOptions()
    check_export_options(render_options)
    convert_settings = ConvertSettings(
        output_location(output_dir), render_options=render_options, **run
    )
    config, closing = EngineConfig(**engine_config), ReportSettings(**report)
    if ray is not None and not isinstance(engine, str):
        raise ValueError("ray= needs an engine name: each Ray actor makes its own engine")
    # The run's one lifecycle, on this machine or on Ray: make the runner (an engine that cannot
    # be made fails every input, in the report too), convert the inputs found, close the report.
    make_engine = functools.partial(create_engine, engine, config, engine_options, server=server)
    try:
        if ray is not None:
            # Imported here: plain convert never loads the Ray runner (nor Ray).
            from hpdparse.runner.ray.driver import RayConverter
            from hpdparse.runner.ray.settings import RaySettings

            ray_settings = ray if isinstance(ray, RaySettings) else RaySettings(address=ray)
            runner: Converter | RayConverter = RayConverter(
                make_engine, convert_settings, ray_settings, progress
            )
        elif not isinstance(engine, str):  # the caller's engine: the caller starts and closes it
            runner = Converter(engine, convert_settings, progress, start_engine=False)
        else:
            runner = Converter(make_engine(), convert_settings, progress, start_engine=True)
    except EngineError as exc:
        if closing.report_path is not None:
            _engine_failure_report(inputs, recursive, str(exc)).write(closing.report_path)
        raise
    sources, errors = discover_inputs([str(i) for i in inputs], recursive=recursive)
    return closing.close(runner.run(sources, errors))


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
    progress: Progress | None = None,
    **report: Any,
) -> RunReport:
    """Rebuild `.md`, `.json` and `images/` of converted document folders from their `raw/`
    pages and their source file (path recorded in `raw/document.json`), without a model;
    `layout` also writes `<stem>.layout.pdf`. `report` are `ReportSettings`' fields
    (``report_path``, ``flag_below``, ``fail_below``)."""
    options = render_options or RenderOptions()
    check_export_options(options)
    closing = ReportSettings(**report)
    folders = [output_location(d) for d in doc_dirs]
    return closing.close(render_folders(folders, options, password, progress, layout=layout))


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
