"""The `hpdparse` command line: parse arguments, call hpdparse.api, print, set the exit code."""

from __future__ import annotations

import contextlib
import signal
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from hpdparse import __version__, api
from hpdparse.commands.eval import eval_command
from hpdparse.commands.options import (
    LOCATION,
    conversion_options,
    decode_options,
    fail,
    storage_options_option,
    use_storage,
)
from hpdparse.commands.render_options import layout_option, make_render_options, render_options
from hpdparse.commands.review import review_command
from hpdparse.commands.serve import serve_command
from hpdparse.engines import registry
from hpdparse.engines.openai.options import DEFAULT_SERVER
from hpdparse.errors import HpdparseError
from hpdparse.hpd.confidence import DEFAULT_FLAG_BELOW
from hpdparse.hpd.protocol import DEFAULT_MODEL
from hpdparse.runner.progress import logged_warnings_shown, make_progress
from hpdparse.runner.settings import (
    AUTO_WORKERS,
    DEFAULT_BATCH_SIZE,
    DEFAULT_DPI,
    MAX_AUTO_WORKERS,
)
from hpdparse.sources.page_ranges import parse_page_ranges
from hpdparse.store.report import EXIT_INTERRUPTED, RunReport, print_summary

EXIT_CODES_HELP = (
    "Exit codes: 0 every document converted (or skipped as already done); 1 at least one "
    "document or page failed (the others are still converted); 2 usage error; 130 interrupted."
)


def _run_options(report_help: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """--report, --quiet and --verbose, shared by convert and render."""

    def decorate(f: Callable[..., Any]) -> Callable[..., Any]:
        f = click.option(
            "-v", "--verbose", is_flag=True, help="Print more (and tracebacks of bugs)."
        )(f)
        f = click.option("-q", "--quiet", is_flag=True, help="Print nothing but errors.")(f)
        f = click.option(
            "--flag-below",
            type=click.FloatRange(0, 1),
            default=DEFAULT_FLAG_BELOW,
            show_default=True,
            help="List the pages whose confidence is below this in the summary and the report.",
        )(f)
        f = click.option(
            "--fail-below",
            type=click.FloatRange(0, 1),
            default=None,
            help="Pages whose confidence is below this count as failed (exit code 1).",
        )(f)
        return click.option(
            "--report",
            "report_path",
            type=LOCATION,
            help=report_help,
        )(f)

    return decorate


def _check_pages(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    try:
        parse_page_ranges(value)
    except ValueError as exc:
        raise click.BadParameter(str(exc)) from None
    return value


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
@click.option(
    "--pages",
    callback=_check_pages,
    metavar="RANGES",
    help="Pages to convert, 1-based: 1-3,7,10- (10 to the end). Default: all.",
)
@click.option(
    "--dpi",
    type=click.IntRange(10, 1200),
    default=DEFAULT_DPI,
    show_default=True,
    help="Resolution pages are rasterized at (very large pages are rasterized at less).",
)
@click.option("--password", help="Password for encrypted PDFs (ignored for the others).")
@click.option(
    "--engine",
    type=click.Choice(registry.ENGINE_NAMES),
    default=registry.DEFAULT_ENGINE,
    show_default=True,
    help=registry.engines_help(),
)
@click.option(
    "--model",
    default=DEFAULT_MODEL,
    show_default=True,
    help="Model: a hub id or a local folder (for openai: the served model name).",
)
@click.option(
    "--server",
    default=DEFAULT_SERVER,
    show_default=True,
    help="Base URL of the HPD server for --engine openai.",
)
@click.option(
    "--batch-size",
    type=click.IntRange(1, None),
    default=DEFAULT_BATCH_SIZE,
    show_default=True,
    help="Pages decoded at once (in flight), across documents.",
)
@click.option(
    "--workers",
    type=click.IntRange(0, None),
    default=AUTO_WORKERS,
    help="Processes rasterizing pages ahead of the engine. Default: one per CPU core (max "
    f"{MAX_AUTO_WORKERS}).",
)
@decode_options
@click.option(
    "--skip-existing/--overwrite",
    default=True,
    show_default=True,
    help="Skip documents already converted with the same settings and resume unfinished ones "
    "(reusing saved pages), or redo everything.",
)
@render_options
@layout_option
@conversion_options
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
@click.option(
    "--ray-actors",
    type=click.IntRange(0, None),
    default=0,
    help="With --ray: engine actors (each holds --batch-size pages in flight). Default: one per "
    "GPU of the cluster, or one per --ray-cpus-per-actor CPUs on a cluster without GPUs.",
)
@click.option(
    "--ray-cpus-per-actor",
    type=click.FloatRange(0.01, None),
    default=None,
    help="With --ray: CPUs each engine actor reserves, for its engine and its rasterizer "
    "processes. Default: 2.",
)
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
    options = make_render_options(kw)
    quiet, verbose = kw.pop("quiet"), kw.pop("verbose")
    if quiet and verbose:
        raise click.UsageError("--quiet and --verbose exclude each other")
    if kw["ray_address"] is None and (kw["ray_actors"] or kw["ray_cpus_per_actor"] is not None):
        raise click.UsageError("--ray-actors and --ray-cpus-per-actor need --ray")
    use_storage(kw["storage_options"], [*kw["inputs"], kw["output"], kw["report_path"]])
    progress = make_progress(quiet=quiet, verbose=verbose)
    previous = _stop_cleanly_on_sigterm()
    try:
        with logged_warnings_shown(progress, quiet):
            report = api.convert(
                kw["inputs"],
                kw["output"],
                engine=kw["engine"],
                model=kw["model"],
                server=kw["server"],
                recursive=kw["recursive"],
                pages=kw["pages"],
                dpi=kw["dpi"],
                password=kw["password"],
                batch_size=kw["batch_size"],
                workers=kw["workers"],
                overwrite=not kw["skip_existing"],
                fork=not kw["no_fork"],
                mtp=not kw["no_mtp"],
                speculative_tokens=kw["speculative_tokens"],
                max_tokens=kw["max_tokens"],
                device=kw["device"],
                dtype=kw["dtype"],
                engine_options=kw["engine_options"],
                render_options=options,
                layout=kw["layout"],
                report_path=kw["report_path"],
                progress=progress,
                ray=kw["ray_address"],
                convert_timeout=kw["convert_timeout"],
                keep_converted_pdf=kw["keep_converted_pdf"],
                ray_actors=kw["ray_actors"],
                ray_cpus_per_actor=kw["ray_cpus_per_actor"],
                flag_below=kw["flag_below"],
                fail_below=kw["fail_below"],
            )
    except KeyboardInterrupt:
        progress.close()
        click.echo("error: interrupted", err=True)
        sys.exit(EXIT_INTERRUPTED)
    except (HpdparseError, ValueError, OSError) as exc:
        progress.close()
        fail(exc, verbose)
    except Exception as exc:
        progress.close()
        fail(exc, verbose, internal=True)
    finally:
        _restore_sigterm(previous)
    progress.close()
    _finish(report, quiet)


@main.command(epilog=EXIT_CODES_HELP)
@click.argument(
    "doc_dirs",
    nargs=-1,
    required=True,
    metavar="DOC_OUTPUT_DIR...",
    type=LOCATION,
)
@click.option("--password", help="Password of encrypted sources (to cut figure images).")
@render_options
@layout_option
@storage_options_option
@_run_options("Write a JSON report of this run.")
def render(**kw: Any) -> None:
    """Rebuild .md, .json and images/ of converted documents from their raw/ pages, without a
    model (the source file, recorded in raw/document.json, is needed for images)."""
    options = make_render_options(kw)
    quiet, verbose = kw.pop("quiet"), kw.pop("verbose")
    use_storage(kw["storage_options"], [*kw["doc_dirs"], kw["report_path"]])
    progress = make_progress(quiet=quiet, verbose=verbose)
    try:
        report = api.render(
            kw["doc_dirs"],
            password=kw["password"],
            render_options=options,
            layout=kw["layout"],
            report_path=kw["report_path"],
            progress=progress,
            flag_below=kw["flag_below"],
            fail_below=kw["fail_below"],
        )
    except (HpdparseError, ValueError, OSError) as exc:
        progress.close()
        fail(exc, verbose)
    except Exception as exc:
        progress.close()
        fail(exc, verbose, internal=True)
    progress.close()
    _finish(report, quiet)


def _stop_cleanly_on_sigterm() -> Any:
    """`kill` (SIGTERM) stops a run like Ctrl-C: finished pages stay, workers are shut down.
    Returns the previous handler."""

    def interrupt(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    try:
        return signal.signal(signal.SIGTERM, interrupt)
    except ValueError:  # not the main thread (embedded use): leave signals alone
        return None


def _restore_sigterm(previous: Any) -> None:
    if previous is not None:
        with contextlib.suppress(ValueError):
            signal.signal(signal.SIGTERM, previous)


def _finish(report: RunReport, quiet: bool) -> None:
    if not quiet:
        print_summary(report, sys.stdout, rich=sys.stdout.isatty())
    sys.exit(report.exit_code)


main.add_command(serve_command, name="serve")
main.add_command(review_command, name="review")
main.add_command(eval_command, name="eval")

if __name__ == "__main__":
    main()
