"""The conversion options a caller sets per document: the `RenderOptions` (every field but the
chunk tokenizer, a path on the server) and the page range and password of `ConvertSettings`.
They are read from form or JSON fields named as the Python API names them, by the declarations
of the settings they belong to (hpdparse.settings): types, bounds and choices come from there."""

from __future__ import annotations

import dataclasses
import typing
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from hpdparse.markdown.render import RenderOptions
from hpdparse.runner.settings import ConvertSettings
from hpdparse.settings import choices, declaration, field_types, value_kind
from hpdparse.sources.page_ranges import PageRanges, parse_page_ranges

_RENDER = {f.name: f for f in dataclasses.fields(RenderOptions) if f.name != "chunk_tokenizer"}
RENDER_FIELDS = tuple(_RENDER)
RUN_FIELDS = ("pages", "password")
FIELDS = RUN_FIELDS + RENDER_FIELDS
_TRUE, _FALSE = {"true", "1", "yes", "on"}, {"false", "0", "no", "off"}


class OptionError(ValueError):
    """A field that is not an option, or a value it does not take (one line)."""


@dataclass
class DocumentOptions:
    """How one document is converted. The password is never written anywhere (`to_json` keeps
    only whether there was one)."""

    render: RenderOptions = field(default_factory=RenderOptions)
    pages: PageRanges = field(default_factory=PageRanges)
    password: str | None = None
    has_password: bool = False

    def to_json(self) -> dict[str, object]:
        values: dict[str, object] = {"pages": str(self.pages)}
        values.update({name: getattr(self.render, name) for name in RENDER_FIELDS})
        values["has_password"] = self.has_password or self.password is not None
        return values

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> DocumentOptions:
        """A stored record's options, as they were accepted (not checked again: a later version's
        tighter checks must not refuse a document accepted earlier)."""
        render = {name: data[name] for name in RENDER_FIELDS if name in data}
        pages = data.get("pages", "all")
        return cls(
            RenderOptions(**render),
            parse_page_ranges(None if pages == "all" else pages),
            has_password=bool(data.get("has_password")),
        )

    def settings(self, output_dir: str, **run: Any) -> ConvertSettings:
        """The conversion run's settings for the document (`run`: the server's own)."""
        return ConvertSettings(
            output_dir, pages=self.pages, password=self.password, render_options=self.render, **run
        )


def read_options(fields: Mapping[str, object]) -> DocumentOptions:
    """The options in a request's fields (form values are text, JSON ones typed); OptionError
    names the first field that is wrong."""
    unknown = sorted(set(fields) - set(FIELDS))
    if unknown:
        raise OptionError(f"unknown option {unknown[0]!r}; the options are: {', '.join(FIELDS)}")
    render = {name: _value(name, fields[name]) for name in RENDER_FIELDS if name in fields}
    pages = fields.get("pages")
    password = fields.get("password")
    try:
        ranges = parse_page_ranges(None if pages in (None, "", "all") else str(pages))
        options = RenderOptions(**render)
    except ValueError as exc:
        raise OptionError(f"pages: {exc}" if "pages" in fields else str(exc)) from None
    return DocumentOptions(options, ranges, str(password) if password else None)


def _value(name: str, value: object) -> object:
    """`value` as the `RenderOptions` field `name` takes it."""
    hint = field_types(RenderOptions)[name]
    if value is None or value == "":
        if type(None) in typing.get_args(hint):
            return None
        raise OptionError(f"{name}: a value is needed")
    kind, text = value_kind(hint), str(value)
    if kind is bool:
        if isinstance(value, bool) or text.lower() in _TRUE | _FALSE:
            return value if isinstance(value, bool) else text.lower() in _TRUE
        raise OptionError(f"{name}: expected true or false, got {value!r}")
    allowed = choices(kind)
    if allowed:
        if text not in allowed:
            raise OptionError(f"{name}: expected one of {', '.join(allowed)}, got {value!r}")
        return kind(text) if isinstance(kind, type) else text
    if kind in (int, float):
        try:
            number = kind(value)
        except (TypeError, ValueError):
            raise OptionError(f"{name}: expected a number, got {value!r}") from None
        declared = declaration(_RENDER[name])
        low, high = declared.low, declared.high
        if (low is not None and number < low) or (high is not None and number > high):
            raise OptionError(f"{name}: {number} is out of range [{low}, {high}]")
        return number
    return text
