"""Click options made from the settings' declarations (`hpdparse.settings.setting`): a field
declared with a flag becomes one option with its help, type, bounds, choices and default, under
the field's own name, so `values` hands the command's keywords back as field values."""

from __future__ import annotations

import dataclasses
import functools
import typing
from collections.abc import Callable
from typing import Any

import click

Decorator = Callable[[Callable[..., Any]], Callable[..., Any]]


def flags(settings: type, *names: str, **help: str) -> Decorator:
    """The options of fields `names` of the dataclass `settings`, in that order in ``--help``;
    `help` replaces a field's help text for this command (by field name)."""

    def decorate(f: Callable[..., Any]) -> Callable[..., Any]:
        for name in reversed(names):
            f = _option(settings, name, help.get(name))(f)
        return f

    return decorate


def values(settings: type, kw: dict[str, Any]) -> dict[str, Any]:
    """Take the fields of `settings` out of a command's keywords, as field values (a negated
    flag such as ``--no-fork`` turned back into ``fork``)."""
    taken = {}
    for f in dataclasses.fields(settings):
        if f.name in kw:
            value = kw.pop(f.name)
            taken[f.name] = not value if f.metadata.get("negate") else value
    return taken


def _option(settings: type, name: str, help: str | None) -> Decorator:
    field = {f.name: f for f in dataclasses.fields(settings)}[name]
    meta = field.metadata
    default = field.default
    kwargs: dict[str, Any] = {
        "help": help or meta["help"],
        "show_default": meta["show_default"],
        "metavar": meta["metavar"],
    }
    kind = _kind(_hints(settings)[name])
    if kind is bool:
        return click.option(
            meta["flag"], name, is_flag=True, default=not default if meta["negate"] else default,
            **kwargs,
        )  # fmt: skip
    if meta["choices"]:
        kwargs["type"] = click.Choice([str(c) for c in meta["choices"]])
        default = str(default)
    elif kind in (int, float) and (meta["low"] is not None or meta["high"] is not None):
        number_range = click.IntRange if kind is int else click.FloatRange
        kwargs["type"] = number_range(meta["low"], meta["high"], min_open=meta["low_open"])
    if meta["parse"] is not None:
        kwargs["callback"] = functools.partial(_parse, meta["parse"])
        default = None
    return click.option(meta["flag"], name, default=default, **kwargs)


def _parse(
    parse: Callable[[Any], Any], ctx: click.Context, param: click.Parameter, text: Any
) -> Any:
    try:
        return parse(text)
    except ValueError as exc:
        raise click.BadParameter(str(exc)) from None


@functools.cache
def _hints(settings: type) -> dict[str, Any]:
    return typing.get_type_hints(settings)


def _kind(hint: Any) -> Any:
    """The type of a field, `X | None` read as X."""
    members = [a for a in typing.get_args(hint) if a is not type(None)]
    return members[0] if typing.get_origin(hint) is not None and len(members) == 1 else hint
