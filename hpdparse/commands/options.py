"""What the commands share: the decoding options (convert, serve), `--engine-option` parsing and
the one-line error exit."""

from __future__ import annotations

import json
import sys
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from hpdparse.engines import registry
from hpdparse.hpd.protocol import DEFAULT_MAX_TOKENS
from hpdparse.markdown.text_layer import DEFAULT_TEXT_LAYER, TEXT_LAYER_MODES
from hpdparse.remote import (
    StorageOpenError,
    StorageUsageError,
    filesystem,
    is_url,
    parse_storage_options,
    set_storage_options,
)
from hpdparse.sources.office import DEFAULT_CONVERT_TIMEOUT
from hpdparse.store.report import EXIT_FAILED, EXIT_USAGE


def parse_engine_options(
    ctx: click.Context, param: click.Parameter, values: tuple[str, ...]
) -> dict[str, Any]:
    options: dict[str, Any] = {}
    for item in values:
        key, sep, text = item.partition("=")
        if not sep or not key.strip():
            raise click.BadParameter(f"{item!r} is not KEY=VALUE")
        try:
            value = json.loads(text)
        except ValueError:
            value = text  # not JSON: a plain string
        options[key.strip()] = value
    return options


def decode_options(f: Callable[..., Any]) -> Callable[..., Any]:
    """--no-fork, --no-mtp, --speculative-tokens, --max-tokens, --device, --dtype and
    --engine-option, shared by convert and serve."""
    options = [
        click.option("--no-fork", is_flag=True, help="Plain decoding, without hierarchical forks."),
        click.option("--no-mtp", is_flag=True, help="No P-MTP speculative decoding (vllm, torch)."),
        click.option(
            "--speculative-tokens",
            type=click.IntRange(1, 32),
            default=6,
            show_default=True,
            help="Draft tokens per P-MTP step.",
        ),
        click.option(
            "--max-tokens",
            type=click.IntRange(1, None),
            default=DEFAULT_MAX_TOKENS,
            show_default=True,
            help="Most tokens decoded for one page.",
        ),
        click.option(
            "--device", help="torch device (cpu, cuda, cuda:1, mps); default: the best one."
        ),
        click.option(
            "--dtype", help="Model dtype (bfloat16, float16, float32); default: per device."
        ),
        click.option(
            "--engine-option",
            "engine_options",
            multiple=True,
            metavar="KEY=VALUE",
            callback=parse_engine_options,
            help="Engine setting, repeatable; VALUE is read as JSON when it parses, else as text. "
            f"{registry.options_help()} Unknown options are an error.",
        ),
    ]
    for option in reversed(options):
        f = option(f)
    return f


def conversion_options(f: Callable[..., Any]) -> Callable[..., Any]:
    """`convert`'s options for Office and HTML inputs (converted to PDF by LibreOffice)."""
    f = click.option(
        "--keep-converted-pdf",
        is_flag=True,
        help="Office and HTML inputs: keep the PDF LibreOffice made as <stem>.converted.pdf.",
    )(f)
    return click.option(
        "--convert-timeout",
        type=click.FloatRange(min=0, min_open=True),
        default=DEFAULT_CONVERT_TIMEOUT,
        show_default=True,
        metavar="SECONDS",
        help="Office and HTML inputs: seconds LibreOffice may take to convert one to PDF.",
    )(f)


text_layer_option = click.option(
    "--text-layer",
    type=click.Choice(TEXT_LAYER_MODES),
    default=DEFAULT_TEXT_LAYER,
    show_default=True,
    help="Use the PDF's own text. verify: check each text block against the PDF's text in its "
    "box and record the agreement in <stem>.json (disagreeing blocks get a lower confidence; "
    "the Markdown is unchanged); prefer: also take text blocks whose PDF text is trustworthy "
    "from the file instead of decoding them (vllm and torch in fork mode; convert only); "
    "off: neither.",
)


def fail(exc: BaseException, verbose: bool, internal: bool = False) -> None:
    if verbose:
        traceback.print_exception(exc, file=sys.stderr)
    message = " ".join(str(exc).split()) or type(exc).__name__
    if isinstance(exc, OSError) and exc.filename:
        message = f"{exc.filename}: {exc.strerror or message}"
    if internal:
        message = f"internal error: {type(exc).__name__}: {message} (rerun with -v for details)"
    click.echo(f"error: {message}", err=True)
    sys.exit(EXIT_FAILED)


class Location(click.ParamType):
    """A local path (a `Path`) or a URL such as s3://bucket/prefix (kept as text)."""

    name = "path_or_url"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if isinstance(value, str) and is_url(value):
            return value
        return Path(value)


LOCATION = Location()


def storage_options_option(f: Callable[..., Any]) -> Callable[..., Any]:
    """--storage-option KEY=VALUE (repeatable), for commands that take URLs."""
    return click.option(
        "--storage-option",
        "storage_options",
        multiple=True,
        metavar="KEY=VALUE",
        help="Setting of the fsspec file system of s3://, gs://, az://... URLs (credentials, "
        "endpoint_url, anon...), repeatable; VALUE is read as JSON when it parses, else as text.",
    )(f)


def use_storage(options: tuple[str, ...], locations: list[Any]) -> None:
    """Take the run's --storage-option pairs and check every URL among `locations` can be used:
    an unknown scheme or a missing extra is a one-line usage error (exit 2)."""
    try:
        set_storage_options(parse_storage_options(options))
        for location in locations:
            if location is not None and is_url(str(location)):
                filesystem(str(location))
    except (StorageUsageError, ValueError) as exc:
        click.echo(f"error: {' '.join(str(exc).split())}", err=True)
        sys.exit(EXIT_USAGE)
    except StorageOpenError as exc:  # a store it cannot even open: nothing there can be done
        click.echo(f"error: {exc.filename}: {exc.strerror}", err=True)
        sys.exit(EXIT_FAILED)
