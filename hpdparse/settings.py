"""One declaration per option. `setting()` makes a dataclass field that carries everything about
an option besides its value (a `Declaration`: the help text, the command-line flag, the bounds;
choices come from the field's type). The settings classes (`RenderOptions`, `EngineConfig` and
the engines' options, `ConvertSettings`, `ReportSettings`, `RaySettings`) declare their fields
with it; the command line's options are made from those fields (hpdparse/commands/flags.py), the
Python API takes them by their field names, and ``--engine-option`` values are checked against
them (hpdparse/engines/options.py).

Also the ``--text-layer`` mode, one type wherever the mode travels.
"""

from __future__ import annotations

import dataclasses
import functools
import typing
from collections.abc import Callable, Mapping
from enum import Enum
from typing import Any, Literal

Keywords = dict[str, Any]
"""Values by setting name: a function's keyword arguments, a command's option values."""


class TextLayerMode(str, Enum):
    """``--text-layer``: what a run does with a PDF's own text. A str, so that JSON, the state
    files and the command line read and write the bare word (enum.StrEnum is Python 3.11+)."""

    __str__ = str.__str__
    __format__ = str.__format__

    OFF = "off"  # nothing
    VERIFY = "verify"  # check text blocks against the PDF's text (markdown/text_layer.py)
    PREFER = "prefer"  # also take trusted text from the file, not decoding it (engines/)


@dataclasses.dataclass(frozen=True)
class Declaration:
    """Everything about an option besides its value. `flag` is its command-line option
    (``--dpi``; ``--a/--b`` for a pair); `negate`: the flag says the opposite of the field
    (``--no-fork`` sets ``fork=False``). `low`/`high` bound a number (`low_open`: strictly above
    `low`); a field typed with a `Literal` or an enum takes one of its values. `parse` turns the
    option's text into the field's value (ValueError: a bad value). `example` and `settable` are
    for engine options: the example ``--help`` shows, and whether ``--engine-option`` may set
    the field."""

    help: str = ""
    flag: str | None = None
    negate: bool = False
    low: float | None = None
    high: float | None = None
    low_open: bool = False
    metavar: str | None = None
    parse: Callable[[str | None], Any] | None = None
    show_default: bool = True
    example: str | None = None
    settable: bool = True


def setting(default: Any, help: str = "", **declared: Any) -> Any:
    """A dataclass field declared with its help text and the other parts of a `Declaration`."""
    metadata = {"declaration": Declaration(help, **declared)}
    if isinstance(default, (dict, list)):
        return dataclasses.field(default_factory=lambda: type(default)(default), metadata=metadata)
    return dataclasses.field(default=default, metadata=metadata)


def declaration(field: dataclasses.Field) -> Declaration:
    """How a dataclass field is declared (one made without `setting()`: no flag, no help)."""
    return field.metadata.get("declaration", Declaration())


@functools.cache
def field_types(settings: type) -> Keywords:
    """The type of each field of a dataclass, by name (its annotations evaluated)."""
    return typing.get_type_hints(settings)


def share_out(values: Mapping[str, Any], *classes: type) -> list[Keywords]:
    """`values` (keyword arguments) shared out among the dataclasses that declare them: one
    dict per class, in order. A name no class declares is a TypeError, as for any function."""
    shares: list[Keywords] = [{} for _ in classes]
    for name, value in values.items():
        for share, cls in zip(shares, classes, strict=True):
            if name in {f.name for f in dataclasses.fields(cls)}:
                share[name] = value
                break
        else:
            raise TypeError(f"unexpected keyword argument {name!r}")
    return shares


def value_kind(hint: Any) -> Any:
    """The type of a field, `X | None` read as X."""
    members = [a for a in typing.get_args(hint) if a is not type(None)]
    return members[0] if typing.get_origin(hint) is not None and len(members) == 1 else hint


def choices(kind: Any) -> list[str]:
    """The values a `Literal` or an enum allows, as the command line writes them."""
    if typing.get_origin(kind) is Literal:
        return [str(c) for c in typing.get_args(kind)]
    if isinstance(kind, type) and issubclass(kind, Enum):
        return [str(member.value) for member in kind]
    return []
