"""`hpdparse review`, the command line of the review pages (hpdparse.review.command)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click

from hpdparse import api
from hpdparse.commands.flags import flags
from hpdparse.commands.options import LOCATION, storage_options_option, use_storage
from hpdparse.errors import HpdparseError
from hpdparse.review.page_images import DEFAULT_MAX_SIDE
from hpdparse.runner.settings import ConvertSettings


@click.command(epilog="Exit codes: 0 all pages written; 1 some problem (each one is printed).")
@click.argument("out", type=LOCATION)
@click.option(
    "-o",
    "--output",
    type=click.Path(file_okay=False, path_type=Path),
    help="For an OUT that is a URL (s3://bucket/prefix/): the local folder its document folders "
    "are copied into and the review pages written to.",
)
@storage_options_option
@flags(ConvertSettings, "password", password="Password of encrypted sources (for the page images).")
@click.option(
    "--image-size",
    type=click.IntRange(200, 5000),
    default=DEFAULT_MAX_SIDE,
    show_default=True,
    help="Longest side, in pixels, of the page images embedded in the pages.",
)
@click.option(
    "--open",
    "open_browser",
    is_flag=True,
    help="Open the index (or the one document's page) in a web browser.",
)
@click.option("-q", "--quiet", is_flag=True, help="Print nothing but errors.")
def review_command(**kw: Any) -> None:
    """Write HTML review pages for the output folder OUT of a run (or one document folder).

    \b
    Each document gets OUT/<stem>/<stem>.review.html, one self-contained file (page images
    embedded, no network needed): page by page, the page image with the blocks' boxes beside
    the rendered Markdown of each block (tables, math); hovering or clicking a box highlights
    its block and the other way round. OUT/review.html lists the documents with status, pages
    and failures. No model is needed: it reads what convert wrote and the source files.
    """
    out, quiet = kw.pop("out"), kw.pop("quiet")
    if isinstance(out, Path) and not out.is_dir():
        raise click.BadParameter(f"{out}: no such folder", param_hint="OUT")
    if isinstance(out, str) and kw["output"] is None:
        raise click.UsageError(f"{out}: a URL is reviewed into a local folder: give -o FOLDER")
    use_storage(kw.pop("storage_options"), [out])
    try:
        result = api.review(out, output_dir=kw.pop("output"), **kw)
    except (HpdparseError, OSError) as exc:
        message = str(exc)
        if isinstance(exc, OSError):
            message = f"{exc.filename or out}: {exc.strerror or exc}"
        click.echo(f"error: {message}", err=True)
        sys.exit(1)
    for problem in result.problems:
        click.echo(f"error: {problem}", err=True)
    if not quiet:
        written = f"{len(result.pages)} review page{'s' if len(result.pages) != 1 else ''}"
        where = result.index or (result.pages[0] if result.pages else out)
        click.echo(f"wrote {written} in {result.seconds:.1f} s: {where}")
    sys.exit(result.exit_code)
