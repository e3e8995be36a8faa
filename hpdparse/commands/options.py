"""What the commands share: the decoding options (convert, serve), `--engine-option` parsing,
URLs and their `--storage-option`s, and the one-line error exit."""

from __future__ import annotations

import contextlib
import sys
import traceback
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import click

from hpdparse.commands.flags import flagged, flags
from hpdparse.engines import registry
from hpdparse.engines.options import EngineConfig
from hpdparse.errors import HpdparseError
from hpdparse.remote import (
    StorageOpenError,
    StorageUsageError,
    filesystem,
    is_url,
    parse_storage_options,
    set_storage_options,
)
from hpdparse.runner.progress import Progress
from hpdparse.settings import Keywords
from hpdparse.store.report import EXIT_FAILED, EXIT_USAGE


def parse_engine_options(
    ctx: click.Context, param: click.Parameter, values: tuple[str, ...]
) -> Keywords:
    for item in values:
        key, sep, _ = item.partition("=")
        if not sep or not key.strip():
            raise click.BadParameter(f"{item!r} is not KEY=VALUE")
    return parse_storage_options(values)  # the same JSON-or-text pairs as --storage-option


engine_option = click.option(
    "--engine-option",
    "engine_options",
    multiple=True,
    metavar="KEY=VALUE",
    callback=parse_engine_options,
    help="Engine setting, repeatable; VALUE is read as JSON when it parses, else as text. "
    f"{registry.options_help()} Unknown options are an error.",
)


def decode_options(f: Callable[..., Any]) -> Callable[..., Any]:
    """--no-fork, --no-mtp, --speculative-tokens, --max-tokens, --device, --dtype (the flagged
    fields of `EngineConfig` but --model) and --engine-option, shared by convert and serve."""
    return flags(EngineConfig, *flagged(EngineConfig, "model"))(engine_option(f))


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


@contextlib.contextmanager
def one_line_errors(verbose: bool, progress: Progress | None = None) -> Iterator[None]:
    """A command's error as one line and exit status 1 (a bug's as an internal error), the
    progress display closed first."""
    try:
        yield
    except Exception as exc:
        if progress is not None:
            progress.close()
        fail(exc, verbose, internal=not isinstance(exc, (HpdparseError, ValueError, OSError)))


class Location(click.ParamType):
    """A local path (a `Path`) or a URL such as s3://bucket/prefix (kept as text)."""

    name = "path_or_url"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if isinstance(value, str) and is_url(value):
            return value
        return Path(value)


LOCATION = Location()


# For the commands that take URLs.
storage_options_option = click.option(
    "--storage-option",
    "storage_options",
    multiple=True,
    metavar="KEY=VALUE",
    help="Setting of the fsspec file system of s3://, gs://, az://... URLs (credentials, "
    "endpoint_url, anon...), repeatable; VALUE is read as JSON when it parses, else as text.",
)


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
