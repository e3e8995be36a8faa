"""report.html: the headline figures and the worst pages, each pair of truth and prediction side
by side with the differing spans marked, tables rendered. One file, no network (inline CSS,
nothing fetched); every text from the inputs is escaped, tables are rebuilt from their cells."""

from __future__ import annotations

import html
from pathlib import Path

from lxml import html as lxml_html
from rapidfuzz.distance import Levenshtein

from hpdparse.eval.aggregate import PerPageFigures
from hpdparse.eval.records import Pair, ScoredPage
from hpdparse.eval.report import _SUMMARY, _figure, _headline, page_badness, worst_pages
from hpdparse.eval.run import Report

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
