"""The `hpdparse` command line: parse arguments, call hpdparse.api, print, set the exit code."""

from __future__ import annotations

import contextlib
import signal
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import click
from click.core import ParameterSource

from hpdparse import __version__, api
from hpdparse.commands.eval import eval_command
from hpdparse.commands.flags import flags, values
from hpdparse.commands.options import (
    LOCATION,
    decode_options,
    one_line_errors,
    storage_options_option,
    use_storage,
)
from hpdparse.commands.review import review_command
from hpdparse.commands.serve import serve_command
from hpdparse.engines import registry
from hpdparse.engines.openai.options import OpenAIOptions
from hpdparse.engines.options import EngineConfig
from hpdparse.errors import HpdparseError
from hpdparse.export.files import check_export_options
from hpdparse.markdown.render import RenderOptions
from hpdparse.runner.progress import Progress, logged_warnings_shown, make_progress
from hpdparse.runner.ray.settings import RaySettings
from hpdparse.runner.settings import ConvertSettings, ReportSettings
from hpdparse.settings import Keywords
from hpdparse.store.report import EXIT_INTERRUPTED, RunReport, print_summary

EXIT_CODES_HELP = (
    "Exit codes: 0 every document converted (or skipped as already done); 1 at least one "
    "document or page failed (the others are still converted); 2 usage error; 130 interrupted."
)


# The Markdown, export and text layer options of convert and render (the fields of RenderOptions).
_render_options = flags(
    RenderOptions,
    "keep_headers",
    "images",
    "table_format",
    "math",
    "page_markers",
    "merge_paragraphs",
    "merge_tables",
    "text_layer",
    "docling",
    "chunks",
    "chunk_tokens",
    "chunk_tokenizer",
)


def _make_render_options(kw: Keywords) -> RenderOptions:
    """Take the options out of click's keywords, checked (a missing extra or a tokenizer that
    cannot load is a usage error)."""
    options = RenderOptions(**values(RenderOptions, kw))
    try:
        check_export_options(options)
    except (HpdparseError, ValueError) as exc:
        raise click.UsageError(str(exc)) from None
    return options


def _run_options(report_help: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """--report, --fail-below, --flag-below, --quiet and --verbose, shared by convert and
    render."""

    def decorate(f: Callable[..., Any]) -> Callable[..., Any]:
        f = click.option(
            "-v", "--verbose", is_flag=True, help="Print more (and tracebacks of bugs)."
        )(f)
        f = click.option("-q", "--quiet", is_flag=True, help="Print nothing but errors.")(f)
        f = flags(ReportSettings, "fail_below", "flag_below")(f)
        return click.option("--report", "report_path", type=LOCATION, help=report_help)(f)

    return decorate


def _check_ray_address(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    if value is None or value in ("local", "auto") or ":" in value:
        return value
    raise click.BadParameter(f"{value!r}: use local, auto or an address such as ray://head:10001")


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(__version__, prog_name="hpdparse")
def main() -> None:
    """Convert PDFs, page images, e-books and Office files to Markdown with the HPD-Parsing
    document parser."""


@main.command(epilog=EXIT_CODES_HELP)
@click.argument("inputs", nargs=-1, required=True, metavar="INPUT...")
@click.option(
    "-o",
    "--output",
    type=LOCATION,
    default=Path("."),
    show_default=True,
    help="Output folder or URL (s3://bucket/prefix/); each document goes to "
    "OUTPUT/<stem>/<stem>.md (a second file with the same stem gets <stem>-<hash of its path>).",
)
@click.option("-r", "--recursive", is_flag=True, help="Look for inputs in subfolders too.")
@flags(ConvertSettings, "pages", "dpi", "password")
@click.option(
    "--engine",
    type=click.Choice(registry.ENGINE_NAMES),
    default=registry.DEFAULT_ENGINE,
    show_default=True,
    help=registry.engines_help(),
)
@flags(EngineConfig, "model")
@flags(OpenAIOptions, "server")
@flags(ConvertSettings, "batch_size", "workers")
@decode_options
@flags(ConvertSettings, "overwrite")
@_render_options
@flags(ConvertSettings, "layout", "convert_timeout", "keep_converted_pdf")
@click.option(
    "--ray",
    "ray_address",
    metavar="local|auto|ADDRESS",
    callback=_check_ray_address,
    help="Run on a Ray cluster through Ray Data: local (start one on this machine for the run, "
    "even where another runs here: one engine actor per GPU), auto (the running cluster: "
    "RAY_ADDRESS or `ray start`), or an address (ray://head:10001). Inputs and -o must be "
    "URLs (s3://...) or on a file system every node sees. Needs pip install 'hpdparse[ray]'.",
)
@flags(RaySettings, "actors", "cpus_per_actor")
@storage_options_option
@_run_options("Write a JSON report: status, pages and errors per input file, totals, throughput.")
def convert(**kw: Any) -> None:
    """Convert PDF and image files (PNG, JPEG, TIFF), EPUB, XPS, MOBI, FB2, CBZ, SVG, and
    Office and HTML files (through LibreOffice), folders and glob patterns to Markdown.

    \b
    Each document gets OUTPUT/<stem>/ with <stem>.md, <stem>.json (blocks with boxes per
    page), images/ (cropped figures) and raw/ (the model's raw output per page, saved as soon
    as the page is done). A rerun skips finished documents and resumes unfinished ones: only
    pages without saved output are decoded again.
    """
    options = _make_render_options(kw)
    quiet, verbose = kw.pop("quiet"), kw.pop("verbose")
    if quiet and verbose:
        raise click.UsageError("--quiet and --verbose exclude each other")
    ray = _ray_settings(kw)
    use_storage(kw.pop("storage_options"), [*kw["inputs"], kw["output"], kw["report_path"]])
    progress = make_progress(quiet=quiet, verbose=verbose)
    try:
        with (
            _sigterm_as_interrupt(),
            one_line_errors(verbose, progress),
            logged_warnings_shown(progress, quiet),
        ):
            report = api.convert(
                kw.pop("inputs"),
                kw.pop("output"),
                render_options=options,
                progress=progress,
                ray=ray,
                **kw,
            )
    except KeyboardInterrupt:
        progress.close()
        click.echo("error: interrupted", err=True)
        sys.exit(EXIT_INTERRUPTED)
    _finish(report, progress, quiet)


@main.command(epilog=EXIT_CODES_HELP)
@click.argument(
    "doc_dirs",
    nargs=-1,
    required=True,
    metavar="DOC_OUTPUT_DIR...",
    type=LOCATION,
)
@flags(
    ConvertSettings, "password", password="Password of encrypted sources (to cut figure images)."
)
@_render_options
@flags(ConvertSettings, "layout")
@storage_options_option
@_run_options("Write a JSON report of this run.")
def render(**kw: Any) -> None:
    """Rebuild .md, .json and images/ of converted documents from their raw/ pages, without a
    model (the source file, recorded in raw/document.json, is needed for images)."""
    options = _make_render_options(kw)
    quiet, verbose = kw.pop("quiet"), kw.pop("verbose")
    use_storage(kw.pop("storage_options"), [*kw["doc_dirs"], kw["report_path"]])
    progress = make_progress(quiet=quiet, verbose=verbose)
    with one_line_errors(verbose, progress):
        report = api.render(kw.pop("doc_dirs"), render_options=options, progress=progress, **kw)
    _finish(report, progress, quiet)


def _ray_settings(kw: Keywords) -> RaySettings | None:
    """--ray and its --ray-* options, taken out of the keywords (None: not on Ray)."""
    address, given = kw.pop("ray_address"), values(RaySettings, kw)
    if address is not None:
        return RaySettings(address=address, **given)
    ctx = click.get_current_context()
    if any(ctx.get_parameter_source(name) != ParameterSource.DEFAULT for name in given):
        raise click.UsageError("--ray-actors and --ray-cpus-per-actor need --ray")
    return None


@contextlib.contextmanager
def _sigterm_as_interrupt() -> Iterator[None]:
    """`kill` (SIGTERM) stops a run like Ctrl-C: finished pages stay, workers are shut down."""

    def interrupt(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    try:
        previous = signal.signal(signal.SIGTERM, interrupt)
    except ValueError:  # not the main thread (embedded use): leave signals alone
        previous = None
    try:
        yield
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)


def _finish(report: RunReport, progress: Progress, quiet: bool) -> None:
    progress.close()
    if not quiet:
        print_summary(report, sys.stdout, rich=sys.stdout.isatty())
    sys.exit(report.exit_code)


main.add_command(serve_command, name="serve")
main.add_command(review_command, name="review")
main.add_command(eval_command, name="eval")

if __name__ == "__main__":
    main()
