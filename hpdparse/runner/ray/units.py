"""Work units and result rows: what travels through Ray Data.

A `WorkUnit` is a row of the input dataset: one document (its source path and output folder,
both on the shared file system) and a few of its pages still to decode. Page images never travel:
the actor rasterizes the pages itself. A `PageRow` is a row of the output: what became of one
page, a few numbers and who decoded it. Both are plain dicts in the dataset (`to_row` /
`from_row`), so Ray stores them as small Arrow tables. No Ray import here.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import Any, TypeAlias, TypeVar

PAGE_DECODED = "decoded"
"""Decoded by this attempt of the unit and saved."""

PAGE_SAVED = "saved"
"""Already saved when the unit started (by an earlier attempt whose actor died): not decoded
again."""

PAGE_FAILED = "failed"
"""Could not be rasterized, or the engine failed it: `error` says why."""

PAGE_GIVEN_UP = "given-up"
"""Not saved, and its unit was begun by more actors than allowed, each of which died."""

PAGE_NO_ENGINE = "no-engine"
"""Not decoded: the actor's engine could not start (`error` says why, and the run ends)."""


Scalar: TypeAlias = int | float | str | bool
Row: TypeAlias = dict[str, Scalar]
"""A dataset row: scalar columns only, so that Ray stores it as a small Arrow table."""

_SCALARS = {"int": int, "float": float, "str": str, "bool": bool}
_FROM_JSON = {"tuple[int, ...]": tuple, "dict[str, int | float]": dict}  # the other fields


_R = TypeVar("_R", bound="_RowRecord")


class _RowRecord:
    """A dataclass whose scalar fields are a row's columns, each other field a column of JSON."""

    def to_row(self) -> Row:
        values = ((f, getattr(self, f.name)) for f in fields(self))
        return {f.name: v if f.type in _SCALARS else json.dumps(v) for f, v in values}

    @classmethod
    def from_row(cls: type[_R], row: Mapping[str, Any]) -> _R:
        return cls(**{f.name: _read(str(f.type), row[f.name]) for f in fields(cls)})


def _read(type_name: str, value: Any) -> Any:
    """A column's value as the field's type (Ray may hand back numpy scalars)."""
    if type_name in _SCALARS:
        return _SCALARS[type_name](value)
    return _FROM_JSON[type_name](json.loads(str(value)))


@dataclass(frozen=True)
class WorkUnit(_RowRecord):
    """Pages `pages` (1-based) of document `doc` (its index in the run) from file `source`, to be
    saved in the document folder at `folder`."""

    unit: int  # index in the run
    doc: int
    source: str  # absolute
    folder: str  # absolute
    pages: tuple[int, ...]


@dataclass
class PageRow(_RowRecord):
    """What became of one page of a unit, and where."""

    unit: int
    doc: int
    page: int
    status: str  # PAGE_DECODED, PAGE_SAVED, PAGE_FAILED, PAGE_GIVEN_UP or PAGE_NO_ENGINE
    error: str = ""
    prompt_tokens: int = 0
    output_tokens: int = 0
    seconds: float = 0.0  # the engine's time for the page
    unit_started: float = 0.0  # time.time() on the actor when it began the unit
    actor: str = ""  # Ray actor id (kept across restarts of the actor)
    pid: int = 0  # the actor's process (a restarted actor has a new one)
    restarted: bool = False  # the actor was restarted (its first process died)
    node: str = ""
    stats: dict[str, int | float] = field(default_factory=dict)  # PageResult.stats


def columns(rows: Iterable[Row]) -> dict[str, list[Scalar]]:
    """Rows as the column dict a `map_batches` function returns."""
    out: dict[str, list[Scalar]] = {}
    for row in rows:
        for key, value in row.items():
            out.setdefault(key, []).append(value)
    return out


def rows_of(batch: Mapping[str, Sequence[Any]]) -> Iterator[Row]:
    """The rows of a column batch (lists or numpy arrays)."""
    keys = list(batch)
    count = len(batch[keys[0]]) if keys else 0
    for i in range(count):
        yield {key: _plain(batch[key][i]) for key in keys}


def _plain(value: Any) -> Any:
    item = getattr(value, "item", None)  # numpy scalars
    return item() if callable(item) else value


def cut_units(
    first_unit: int, doc: int, source: str, folder: str, pages: list[int], unit_pages: int
) -> list[WorkUnit]:
    """`pages` of one document in units of at most `unit_pages`, numbered from `first_unit`."""
    return [
        WorkUnit(first_unit + i, doc, source, folder, tuple(pages[start : start + unit_pages]))
        for i, start in enumerate(range(0, len(pages), unit_pages))
    ]
