"""The report of a run: report.json (every figure), the terminal summary, and report.html: the
headline figures and the worst pages, each pair of truth and prediction side by side with the
differing spans marked, tables rendered. One file, no network (inline CSS, nothing fetched);
every text from the inputs is escaped, tables are rebuilt from their cells."""

from __future__ import annotations

import html
import json
import math
from dataclasses import fields
from pathlib import Path
from typing import Any

from lxml import html as lxml_html
from rapidfuzz.distance import Levenshtein
from rich.console import Console
from rich.table import Table

from hpdparse.eval.aggregate import ElementFigures, PerPageFigures
from hpdparse.eval.records import Pair, ScoredPage
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
    strict = json.loads(json.dumps(public), parse_constant=_nan_as_null)
    path.write_text(json.dumps(strict, indent=2, ensure_ascii=False) + "\n", "utf-8")


def _nan_as_null(constant: str) -> float | None:
    """NaN (a figure with nothing to average) as JSON's null; +-Infinity stays as it was."""
    return None if constant == "NaN" else float(constant)


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


_CSS = """
body{font-family:system-ui,sans-serif;margin:1.5em;color:#222}
table.sum td,table.sum th{padding:.2em .8em;border-bottom:1px solid #ddd;text-align:left}
.page{border-top:2px solid #888;margin-top:2em}
.pair{display:grid;grid-template-columns:1fr 1fr;gap:1em;margin:.8em 0;
border-bottom:1px dashed #ccc;padding-bottom:.8em}
.side{white-space:pre-wrap;font-family:ui-monospace,monospace;font-size:.85em;
background:#fafafa;padding:.5em;overflow-x:auto}
del{background:#fbb;text-decoration:none}ins{background:#bfb;text-decoration:none}
.tbl table{border-collapse:collapse;font-size:.85em}
.tbl td,.tbl th{border:1px solid #999;padding:.15em .4em}
.meta{color:#666;font-size:.85em}
"""


def marked_diff(truth: str, pred: str) -> tuple[str, str]:
    """(truth, prediction) as HTML: what only the truth has in <del>, what only the prediction
    has in <ins>."""
    left, right = [], []
    for op in Levenshtein.opcodes(truth, pred):
        a = html.escape(truth[op.src_start : op.src_end])
        b = html.escape(pred[op.dest_start : op.dest_end])
        equal = op.tag == "equal"
        if a:
            left.append(a if equal else f"<del>{a}</del>")
        if b:
            right.append(b if equal else f"<ins>{b}</ins>")
    return "".join(left), "".join(right)


def safe_table(markup: str) -> str:
    """An HTML table rebuilt from its rows and cells (text and spans only)."""
    try:
        root = lxml_html.fromstring(markup)
    except Exception:
        return ""
    rows = []
    for row in root.iter("tr"):
        cells = []
        for cell in row:
            if cell.tag not in ("td", "th"):
                continue
            spans = "".join(
                f' {name}="{int(cell.get(name))}"'
                for name in ("colspan", "rowspan")
                if (cell.get(name) or "").isdigit() and int(cell.get(name)) > 1
            )
            cells.append(f"<td{spans}>{html.escape(cell.text_content())}</td>")
        rows.append("<tr>" + "".join(cells) + "</tr>")
    return "<table>" + "".join(rows) + "</table>" if rows else ""


def _pair_html(kind: str, pair: Pair) -> str:
    truth, pred = pair.gt, pair.pred
    left, right = marked_diff(truth, pred)
    figures = ", ".join(f"{k} {v:.3f}" for k, v in pair.metric.items())
    out = f'<p class="meta">{html.escape(kind)} · {html.escape(figures or "not scored")}</p>'
    out += f'<div class="pair"><div class="side">{left}</div><div class="side">{right}</div></div>'
    if kind == "table":
        tables = f"<div>{safe_table(truth)}</div><div>{safe_table(pred)}</div>"
        out += f'<div class="pair tbl">{tables}</div>'
    return out


def _page_html(page: ScoredPage, figures: PerPageFigures) -> str:
    pairs = [("text", p) for p in page.text + page.formula_as_text]
    pairs += [("display formula", p) for p in page.formula] + [("table", p) for p in page.table]
    pairs.sort(key=lambda kp: -kp[1].metric.get("Edit_dist", 0))
    stats = ", ".join(f"{k} {_figure(v)}" for k, v in figures.items() if v is not None)
    out = f'<section class="page"><h2>{html.escape(page.name)}</h2>'
    out += f'<p class="meta">shortfall {page_badness(figures):.3f} · {html.escape(stats)}</p>'
    out += '<p class="meta">left: truth, right: prediction</p>'
    return out + "".join(_pair_html(kind, pair) for kind, pair in pairs) + "</section>"


def write_html(report: Report, path: Path, worst: int = 20) -> None:
    metrics = report.metrics
    rows = "".join(
        f"<tr><td>{label}</td><td>{name}</td><td>{_figure(_headline(metrics, e, m))}</td></tr>"
        for label, e, m, name in _SUMMARY
    )
    overall = report.overall
    rows += f"<tr><th>Overall</th><td></td><th>{_figure(overall['value'])}</th></tr>"
    pages = {p.name: p for p in report.scored}
    worst_names = worst_pages(report, worst)
    body = "".join(_page_html(pages[n], report.per_page[n]) for n in worst_names)
    doc = (
        '<!DOCTYPE html><html><head><meta charset="utf-8"><title>hpdparse eval</title>'
        f"<style>{_CSS}</style></head><body><h1>hpdparse eval</h1>"
        f'<p class="meta">prediction {html.escape(report.prediction)} · truth '
        f"{html.escape(report.truth)} · {report.pages['scored']} pages scored</p>"
        f'<table class="sum"><tr><th>element</th><th>metric</th><th>score</th></tr>{rows}'
        f'</table><p class="meta">score: edit distances averaged over pages, TEDS over tables. '
        f"{html.escape(overall['substitution'])}</p>"
        f"<h2>The {len(worst_names)} worst pages</h2>{body}</body></html>"
    )
    path.write_text(doc, encoding="utf-8")
