"""Click options made from the settings' declarations (`hpdparse.settings.setting`): a field
declared with a flag becomes one option with its help, type, bounds, choices and default, under
the field's own name and with the field's values, so a command's keywords are field values."""

from __future__ import annotations

import dataclasses
import functools
import operator
from collections.abc import Callable
from typing import Any

import click

from hpdparse.settings import Keywords, choices, declaration, field_types, value_kind

Decorator = Callable[[Callable[..., Any]], Callable[..., Any]]


def flags(settings: type, *names: str, **help: str) -> Decorator:
    """The options of fields `names` of the dataclass `settings`, in that order in ``--help``;
    `help` replaces a field's help text for this command (by field name)."""

    def decorate(f: Callable[..., Any]) -> Callable[..., Any]:
        for name in reversed(names):
            f = _option(settings, name, help.get(name))(f)
        return f

    return decorate


def flagged(settings: type, *but: str) -> list[str]:
    """The fields of the dataclass `settings` declared with a flag, in order, but those named."""
    fields = dataclasses.fields(settings)
    return [f.name for f in fields if declaration(f).flag and f.name not in but]


def values(settings: type, kw: Keywords) -> Keywords:
    """Take the fields of `settings` out of a command's keywords."""
    return {f.name: kw.pop(f.name) for f in dataclasses.fields(settings) if f.name in kw}


def _option(settings: type, name: str, help: str | None) -> Decorator:
    field = {f.name: f for f in dataclasses.fields(settings)}[name]
    declared = declaration(field)
    default = field.default
    kwargs: Keywords = {
        "help": help or declared.help,
        "show_default": declared.show_default,
        "metavar": declared.metavar,
    }
    kind = value_kind(field_types(settings)[name])
    if kind is bool:
        if declared.negate:  # the command's keyword is still the field's value
            kwargs["callback"] = functools.partial(_parse, operator.not_)
            default = not default
        return click.option(declared.flag, name, is_flag=True, default=default, **kwargs)
    allowed = choices(kind)
    if allowed:
        kwargs["type"] = click.Choice(allowed)
        default = str(default)
    elif kind in (int, float) and (declared.low is not None or declared.high is not None):
        number_range = click.IntRange if kind is int else click.FloatRange
        kwargs["type"] = number_range(declared.low, declared.high, min_open=declared.low_open)
    if declared.parse is not None:
        kwargs["callback"] = functools.partial(_parse, declared.parse)
        default = None
    return click.option(declared.flag, name, default=default, **kwargs)


def _parse(
    parse: Callable[[Any], Any], ctx: click.Context, param: click.Parameter, text: Any
) -> Any:
    try:
        return parse(text)
    except ValueError as exc:
        raise click.BadParameter(str(exc)) from None
