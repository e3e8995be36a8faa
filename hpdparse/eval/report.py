"""The report of a run: report.json (every figure), the terminal summary, and which pages are
the worst (for the HTML page, report_html)."""

from __future__ import annotations

import json
import math
from dataclasses import fields
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from hpdparse.eval.aggregate import ElementFigures, PerPageFigures
from hpdparse.eval.run import Report

_SUMMARY = [
    ("text", "text_block", "Edit_dist", "edit distance ↓"),
    ("display formulas", "display_formula", "Edit_dist", "edit distance ↓"),
    ("tables", "table", "TEDS", "TEDS ↑"),
    ("tables", "table", "TEDS_structure_only", "TEDS structure only ↑"),
    ("tables", "table", "Edit_dist", "edit distance ↓"),
    ("reading order", "reading_order", "Edit_dist", "edit distance ↓"),
]
_BREAKDOWN = [
    ("text edit", "text_block", "Edit_dist"),
    ("formula edit", "display_formula", "Edit_dist"),
    ("table TEDS", "table", "TEDS"),
    ("order edit", "reading_order", "Edit_dist"),
]


def write_json(report: Report, path: Path) -> None:
    public = {f.name: getattr(report, f.name) for f in fields(report) if f.name != "scored"}
    strict = json.loads(json.dumps(public), parse_constant=lambda _: None)  # NaN -> null
    path.write_text(json.dumps(strict, indent=2, ensure_ascii=False) + "\n", "utf-8")


def _figure(value: Any) -> str:
    if not isinstance(value, float) or math.isnan(value):
        return "-"
    return f"{value:.4f}"


def _headline(metrics: dict[str, ElementFigures], element: str, metric: str) -> float | str | None:
    figures = metrics[element]["all"].get(metric, {})
    return figures.get("all") if metric.startswith("TEDS") else figures.get("ALL_page_avg")


def summary_table(report: Report) -> Table:
    pages = report.pages
    table = Table(title=f"hpdparse eval: {pages['scored']} of {pages['truth']} truth pages scored")
    for column in ("element", "metric", "page average", "whole set"):
        table.add_column(
            column, justify="right" if column in ("page average", "whole set") else "left"
        )
    metrics = report.metrics
    for label, element, metric, name in _SUMMARY:
        whole = metrics[element]["all"].get(metric, {}).get("edit_whole")
        table.add_row(label, name, _figure(_headline(metrics, element, metric)), _figure(whole))
    overall = report.overall
    table.add_row("overall", "OmniDocBench, 0-100 ↑", _figure(overall["value"]), "")
    table.caption = (
        "score: edit distances averaged over pages, TEDS over tables (OmniDocBench's figures); "
        "whole set: all edits over all lengths. " + overall["substitution"]
    )
    return table


def breakdown_table(report: Report) -> Table | None:
    """Page-attribute breakdown (truth with page attributes only)."""
    metrics = report.metrics
    labels = sorted({label for _, e, m in _BREAKDOWN for label in metrics[e]["page"].get(m, {})})
    if not labels:
        return None
    table = Table(title="By page attribute (page averages)")
    table.add_column("attribute")
    for name, _, _ in _BREAKDOWN:
        table.add_column(name, justify="right")
    for label in labels:
        row = [_figure(metrics[e]["page"].get(m, {}).get(label)) for _, e, m in _BREAKDOWN]
        table.add_row(label, *row)
    return table


def problem_lines(report: Report) -> list[str]:
    problems = report.problems
    lines = [f"missing prediction: {p['page']} ({p['reason']})" for p in problems["missing"]]
    lines += [f"not scored: {p['page']} ({p['reason']})" for p in problems["failed"]]
    return lines + problems["truth"] + problems["notes"]


def print_summary(report: Report, console: Console) -> None:
    console.print(summary_table(report))
    table = breakdown_table(report)
    if table is not None:
        console.print(table)
    for line in problem_lines(report):
        console.print(f"[yellow]warning:[/yellow] {line}", markup=True, highlight=False)


def page_badness(figures: PerPageFigures) -> float:
    """A page's mean shortfall over its elements (edit distances, 1 - TEDS): what orders the
    worst pages."""
    teds = figures["table_teds"]
    parts = [
        figures["text_block_edit"],
        figures["display_formula_edit"],
        figures["reading_order_edit"],
        None if teds is None else 1 - teds,
    ]
    parts = [p for p in parts if p is not None]
    return sum(parts) / len(parts) if parts else 0.0


def worst_pages(report: Report, count: int) -> list[str]:
    per_page = report.per_page
    return sorted(per_page, key=lambda name: -page_badness(per_page[name]))[:count]
