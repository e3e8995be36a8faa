"""The run report: per input file status, totals, throughput; JSON and a one-screen summary."""

from __future__ import annotations

import sys
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any, TextIO

from hpdparse.remote import is_url
from hpdparse.sources.document import plural
from hpdparse.store.atomic import json_bytes
from hpdparse.store.confidence_report import flagged_pages, lowest_pages, summary_line
from hpdparse.store.statuses import (
    REPORT_STATUSES,
    STATUS_CONVERTED,
    STATUS_FAILED,
    STATUS_INTERRUPTED,
    STATUS_PARTIAL,
    STATUS_SKIPPED,
)

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130

REPORT_FORMAT = 1
TEXT_LAYER_KEYS = ("checked", "trusted", "disagree")

# Engine statistics summed over the pages decoded in this run, in this order when present.
STAT_KEYS = (
    "decoding_steps",
    "forks",
    "child_tokens",
    "cached_tokens",
    "drafted_tokens",
    "accepted_tokens",
    "file_children",
    "file_tokens",
    "retries",
)
# Summary wording of the engine statistics whose key does not read well with spaces.
STAT_NAMES = {"file_children": "children from the file", "file_tokens": "tokens from the file"}


@dataclass
class DocumentReport:
    """What happened to one input file."""

    source: str
    status: str = STATUS_FAILED
    output_dir: str | None = None
    pages: int = 0  # selected pages (0 when the document could not be opened)
    pages_done: int = 0  # pages with raw output at the end (decoded now or reused)
    pages_failed: int = 0
    pages_reused: int = 0  # pages whose raw output from an earlier run was reused
    pages_decoded: int = 0  # pages sent to the engine in this run and decoded
    failed_pages: dict[int, str] = field(default_factory=dict)
    error: str | None = None
    seconds: float = 0.0
    prompt_tokens: int = 0
    output_tokens: int = 0
    # page -> confidence (hpd/confidence.py), for the pages that have one
    page_confidence: dict[int, float] = field(default_factory=dict)
    # --text-layer: text-like blocks checked, with a trusted text layer, disagreeing with it
    text_layer: dict[str, int] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        del data["page_confidence"]
        data["text_layer"] = text_layer_json([self])
        data["lowest_confidence_pages"] = lowest_pages(self)
        data["failed_pages"] = {str(k): v for k, v in sorted(self.failed_pages.items())}
        data["seconds"] = round(self.seconds, 3)
        return data


@dataclass
class ActorReport:
    """What one engine actor of a `--ray` run did (a restarted actor keeps its id and gets a new
    process: `restarts`)."""

    actor: str
    node: str = ""
    units: int = 0
    pages_decoded: int = 0
    pages_failed: int = 0
    output_tokens: int = 0
    engine_seconds: float = 0.0  # the engine's time summed over the pages it decoded
    restarts: int = 0


@dataclass
class ClusterReport:
    """The Ray side of a `--ray` run: where, how many actors, the work units and what each
    actor did."""

    address: str
    actors_requested: int = 0
    units: int = 0
    units_given_up: int = 0  # units whose actor died on every attempt
    pages_redone: int = 0  # pages whose result came twice (a unit retried after its rows)
    pages_recovered: int = 0  # pages a retried unit found saved by its attempt that died
    actors: list[ActorReport] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        for actor in data["actors"]:
            actor["engine_seconds"] = round(actor["engine_seconds"], 3)
        return data


@dataclass
class RunReport:
    """A whole run: `hpdparse convert` or `hpdparse render`."""

    command: str = "convert"
    engine: str | None = None
    model: str | None = None
    revision: str | None = None
    output_dir: str | None = None
    documents: list[DocumentReport] = field(default_factory=list)
    seconds: float = 0.0
    engine_seconds: float = 0.0  # from the first page sent to the engine to the last result
    stats: dict[str, float] = field(default_factory=dict)
    interrupted: bool = False
    engine_error: str | None = None
    cluster: ClusterReport | None = None  # `convert --ray` only
    flag_below: float | None = None  # pages below it are listed (store/confidence_report.py)
    fail_below: float | None = None  # pages below it were made failed pages

    def count(self, status: str) -> int:
        return sum(1 for d in self.documents if d.status == status)

    @property
    def pages_decoded(self) -> int:
        return sum(d.pages_decoded for d in self.documents)

    @property
    def output_tokens(self) -> int:
        return sum(d.output_tokens for d in self.documents)

    @property
    def pages_per_second(self) -> float:
        return self.pages_decoded / self.engine_seconds if self.engine_seconds > 0 else 0.0

    @property
    def output_tokens_per_second(self) -> float:
        return self.output_tokens / self.engine_seconds if self.engine_seconds > 0 else 0.0

    @property
    def exit_code(self) -> int:
        """0 when every document is converted or skipped; 1 when any failed or is partial; 130
        when the run was interrupted."""
        if self.interrupted:
            return EXIT_INTERRUPTED
        ok = all(d.status in (STATUS_CONVERTED, STATUS_SKIPPED) for d in self.documents)
        return EXIT_OK if ok and not self.engine_error else EXIT_FAILED

    def add_stats(self, stats: dict[str, int | float]) -> None:
        for key, value in stats.items():
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                self.stats[key] = self.stats.get(key, 0) + value

    def to_json(self) -> dict[str, Any]:
        totals = {status: self.count(status) for status in REPORT_STATUSES}
        totals["documents"] = len(self.documents)
        for counted in fields(DocumentReport):  # the pages and tokens of every document
            if counted.type == "int":
                totals[counted.name] = sum(getattr(d, counted.name) for d in self.documents)
        return {
            "format": REPORT_FORMAT,
            **{name: getattr(self, name) for name in ("command", "engine", "model", "revision")},
            "output_dir": self.output_dir,
            "exit_code": self.exit_code,
            "interrupted": self.interrupted,
            "engine_error": self.engine_error,
            "seconds": round(self.seconds, 3),
            "engine_seconds": round(self.engine_seconds, 3),
            "pages_per_second": round(self.pages_per_second, 3),
            "output_tokens_per_second": round(self.output_tokens_per_second, 1),
            "totals": totals,
            "engine_stats": {k: self.stats[k] for k in sorted(self.stats)},
            "flag_below": self.flag_below,
            "fail_below": self.fail_below,
            "flagged_pages": flagged_pages(self),
            "text_layer": text_layer_json(self.documents),
            "documents": [d.to_json() for d in self.documents],
            **({"ray": self.cluster.to_json()} if self.cluster is not None else {}),
        }

    def write(self, path: Path | str) -> None:
        """Write the report as JSON, atomically (a URL: one PUT)."""
        from hpdparse.store.output_store import open_document_folder

        if isinstance(path, str) and is_url(path):
            folder, name = path.rsplit("/", 1)
        else:
            folder, name = Path(path).parent, Path(path).name
        open_document_folder(folder).write_bytes(name, json_bytes(self.to_json()))


def text_layer_json(documents: list[DocumentReport]) -> dict[str, int | float | None] | None:
    """The documents' text layer counts summed, with the share of blocks that disagree with a
    trusted text layer; None when no block was checked (--text-layer off, no text layer)."""
    totals: dict[str, int | float | None]
    totals = {k: sum(d.text_layer.get(k, 0) for d in documents) for k in TEXT_LAYER_KEYS}
    if not totals["checked"]:
        return None
    trusted = totals["trusted"]
    totals["disagree_share"] = round(totals["disagree"] / trusted, 4) if trusted else None
    return totals


# --- the end-of-run summary --------------------------------------------------------------------


def _totals_line(report: RunReport) -> str:
    shown = [s for s in REPORT_STATUSES if s != STATUS_INTERRUPTED or report.count(s)]
    counts = ", ".join(f"{report.count(s)} {s}" for s in shown)
    line = f"{plural(len(report.documents), 'document')}: {counts}"
    if report.pages_decoded:
        line += (
            f"; {plural(report.pages_decoded, 'page')} decoded in {report.engine_seconds:.1f} s "
            f"({report.pages_per_second:.2f} pages/s, "
            f"{report.output_tokens_per_second:.0f} output tokens/s)"
        )
    line += f"; {report.seconds:.1f} s in all"
    return line


def _doc_line(doc: DocumentReport) -> str:
    where = f" -> {doc.output_dir}" if doc.output_dir and doc.status != STATUS_FAILED else ""
    pages = f" ({doc.pages_done}/{doc.pages} pages" if doc.pages else ""
    if pages:
        pages += f", {doc.pages_failed} failed)" if doc.pages_failed else ")"
    error = f": {doc.error}" if doc.error else ""
    return f"{doc.status:<11} {doc.source}{pages}{where}{error}"


def _extra_lines(report: RunReport) -> list[str]:
    """The engine's statistics, the Ray cluster's work and the text layer's agreement, those
    the run has."""
    lines = []
    stats = [
        f"{STAT_NAMES.get(k, k.replace('_', ' '))} {int(report.stats[k])}"
        for k in STAT_KEYS
        if k in report.stats
    ]
    if stats:
        lines.append("engine: " + ", ".join(stats))
    if (cluster := report.cluster) is not None:
        actors = ", ".join(
            f"{a.actor[:8] or '?'}@{a.node} {a.pages_decoded} pages in {a.units} units"
            + (f" ({a.restarts} restarts)" if a.restarts else "")
            for a in cluster.actors
        )
        given_up = f", {cluster.units_given_up} given up" if cluster.units_given_up else ""
        lines.append(
            f"ray {cluster.address}: {cluster.units} work units{given_up}; "
            f"{len(cluster.actors)} actors: {actors or 'none'}"
        )
    totals = text_layer_json(report.documents)
    if totals and totals["trusted"]:
        lines.append(
            f"text layer: {totals['disagree']} of {totals['trusted']} text blocks with a "
            f"trusted PDF text disagree with it ({100 * totals['disagree_share']:.1f}%)"
        )
    return lines


_COLOURS = {
    STATUS_CONVERTED: "green",
    STATUS_SKIPPED: "cyan",
    STATUS_PARTIAL: "yellow",
    STATUS_FAILED: "red",
    STATUS_INTERRUPTED: "magenta",
}


def _doc_table(docs: list[DocumentReport]) -> Any:
    from rich.table import Table

    table = Table(show_header=True, header_style="bold", box=None, pad_edge=False)
    for column in ("status", "file", "pages", "output / error"):
        table.add_column(column, overflow="fold")
    for d in docs:
        pages = f"{d.pages_done}/{d.pages}" if d.pages else "-"
        if d.pages_failed:
            pages += f" ({d.pages_failed} failed)"
        status = f"[{_COLOURS.get(d.status, 'white')}]{d.status}[/]"
        table.add_row(status, Path(d.source).name, pages, d.error or (d.output_dir or ""))
    return table


def print_summary(report: RunReport, stream: TextIO | None = None, rich: bool = False) -> None:
    """A one-screen summary: the documents that need attention (all of them when few), then the
    totals. `rich` draws a table (for a terminal)."""
    stream = stream or sys.stdout
    docs = report.documents
    attention = [d for d in docs if d.status not in (STATUS_CONVERTED, STATUS_SKIPPED)]
    shown = docs if len(docs) <= 15 else attention[:15]
    hidden = len(attention) - len(shown) if len(docs) > 15 else 0
    more = f"... and {hidden} more that need attention (see --report)" if hidden else None
    lines = [more, _totals_line(report), *_extra_lines(report), summary_line(report)]
    if rich:
        from rich.console import Console

        console = Console(file=stream)
        if shown:
            console.print(_doc_table(shown))
        for line in filter(None, lines):
            console.print(line, highlight=line is more)
    else:
        for line in [*map(_doc_line, shown), *filter(None, lines)]:
            print(line, file=stream)
