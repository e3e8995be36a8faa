"""`hpdparse eval`, the command line of hpdparse.eval (OmniDocBench's end-to-end scores)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click

# The modules of the `eval` extra (a missing one is named in a one-line error).
EXTRA_MODULES = ("apted", "bs4", "pylatexenc", "scipy", "lxml", "numpy")
EVAL_EXIT_CODES = (
    "Exit codes: 0 scored (pages without a prediction or that could not be scored are listed as "
    "warnings); 1 the truth cannot be read, or the eval extra is missing; 2 usage error."
)


def _error(message: str) -> None:
    click.echo(f"error: {message}", err=True)
    sys.exit(1)


def _load_eval() -> Any:
    try:
        from hpdparse.eval import report, run
    except ImportError as exc:
        missing = exc.name or str(exc)
        if missing.split(".")[0] not in EXTRA_MODULES:
            raise
        _error(
            f"hpdparse eval needs the eval extra (missing module: {missing}); install it with: "
            "pip install 'hpdparse[eval]'"
        )
    return run, report


@click.command(epilog=EVAL_EXIT_CODES)
@click.argument("pred", type=click.Path(path_type=Path))
@click.option(
    "--truth",
    required=True,
    type=click.Path(path_type=Path),
    help="OmniDocBench-format JSON (pages matched by their image's name), or a folder of "
    "reference Markdown files named like the predictions.",
)
@click.option(
    "-o",
    "--output",
    "report_dir",
    type=click.Path(file_okay=False, path_type=Path),
    help="Write report.json (every figure) and report.html (the worst pages side by side) here.",
)
@click.option(
    "--workers",
    type=click.IntRange(1, None),
    default=None,
    help="Processes scoring pages. Default: one per CPU core (max 16).",
)
@click.option(
    "--worst",
    type=click.IntRange(0, None),
    default=20,
    show_default=True,
    help="Pages shown in report.html, the worst first.",
)
@click.option("-q", "--quiet", is_flag=True, help="Print nothing but errors.")
def eval_command(**kw: Any) -> None:
    """Score PRED's Markdown against ground truth the way OmniDocBench's end-to-end evaluation
    does: text, display formula and table edit distances, TEDS, reading order, the overall
    score, and breakdowns by page attribute.

    \b
    PRED: an output folder of `hpdparse convert` (<stem>/<stem>.md per document; pages of a
    document are found by their <!-- page N --> markers, from --page-markers), or a folder of
    Markdown files, one per page or per document (<page image name>.md, as MinerU, marker,
    docling or olmOCR write them).
    """
    if not kw["pred"].is_dir():
        _error(f"{kw['pred']}: no such folder")
    run, report = _load_eval()
    try:
        result = run.evaluate(kw["pred"], kw["truth"], workers=kw["workers"])
    except ValueError as exc:
        _error(str(exc))
    if kw["report_dir"] is not None:
        kw["report_dir"].mkdir(parents=True, exist_ok=True)
        report.write_json(result, kw["report_dir"] / "report.json")
        report.write_html(result, kw["report_dir"] / "report.html", worst=kw["worst"])
    if not kw["quiet"]:
        from rich.console import Console

        report.print_summary(result, Console(highlight=False))
