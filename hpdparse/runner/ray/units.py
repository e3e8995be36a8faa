"""Work units and result rows: what travels through Ray Data.

A `WorkUnit` is a row of the input dataset: one document (its source path and output folder,
both on the shared file system) and a few of its pages still to decode. Page images never travel:
the actor rasterizes the pages itself. A `PageRow` is a row of the output: what became of one
page, a few numbers and who decoded it. Both are plain dicts in the dataset (`to_row` /
`from_row`), so Ray stores them as small Arrow tables. No Ray import here.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass, field, fields
from typing import Any

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


@dataclass(frozen=True)
class WorkUnit:
    """Pages `pages` (1-based) of document `doc` (its index in the run) from file `source`, to be
    saved in the document folder at `folder`."""

    unit: int  # index in the run
    doc: int
    source: str  # absolute
    folder: str  # absolute
    pages: tuple[int, ...]

    def to_row(self) -> dict[str, Any]:
        return {
            "unit": self.unit,
            "doc": self.doc,
            "source": self.source,
            "folder": self.folder,
            "pages": json.dumps(list(self.pages)),
        }

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> WorkUnit:
        return cls(**_scalars(cls, row), pages=tuple(json.loads(str(row["pages"]))))


@dataclass
class PageRow:
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

    def to_row(self) -> dict[str, Any]:
        row = asdict(self)
        row["stats"] = json.dumps(self.stats)
        return row

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> PageRow:
        return cls(**_scalars(cls, row), stats=json.loads(str(row["stats"])))


def _scalars(cls: type, row: dict[str, Any]) -> dict[str, int | float | str | bool]:
    """A row's int, float, str and bool fields as the Python types `cls` declares (Ray may hand
    back numpy scalars)."""
    types = {"int": int, "float": float, "str": str, "bool": bool}
    return {f.name: types[f.type](row[f.name]) for f in fields(cls) if f.type in types}


def columns(rows: Iterable[dict[str, Any]]) -> dict[str, list[Any]]:
    """Rows as the column dict a `map_batches` function returns."""
    out: dict[str, list[Any]] = {}
    for row in rows:
        for key, value in row.items():
            out.setdefault(key, []).append(value)
    return out


def rows_of(batch: dict[str, Any]) -> Iterator[dict[str, Any]]:
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
