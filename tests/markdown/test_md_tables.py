"""Table HTML: sanitising, truncated tables, GFM conversion, spans, merges."""

from __future__ import annotations

import pytest

from hpdparse.markdown.tables import (
    merge_tables,
    parse_table,
    render_table,
    to_gfm,
    to_html,
)

SIMPLE = "<table><tr><td>a</td><td>b</td></tr><tr><td>1</td><td>2</td></tr></table>"


def test_simple_table_to_gfm() -> None:
    assert render_table(parse_table(SIMPLE), "auto", True) == ("| a | b |\n|---|---|\n| 1 | 2 |")


def test_spans_keep_html_in_auto_and_attributes_are_normalised() -> None:
    table = parse_table("<table><tr><td rowspan=2>a</td><td colspan='2'>b</td></tr></table>")
    assert table.has_spans
    assert render_table(table, "auto", True) == (
        '<table>\n<tr><td rowspan="2">a</td><td colspan="2">b</td></tr>\n</table>'
    )


def test_forced_gfm_expands_spans_into_empty_cells() -> None:
    table = parse_table(
        "<table><tr><td rowspan=2>a</td><td colspan=2>b</td></tr>"
        "<tr><td>c</td><td>d</td></tr></table>"
    )
    assert table.width == 3
    assert to_gfm(table, True) == "| a | b |  |\n|---|---|---|\n|  | c | d |"


def test_forced_html_for_plain_table() -> None:
    assert render_table(parse_table(SIMPLE), "html", True).startswith("<table>\n<tr><td>a</td>")


def test_untrusted_markup_is_dropped_or_escaped() -> None:
    table = parse_table(
        '<table style="x" onload="evil()"><tr onclick="x"><td class=c>'
        '<img src=x onerror=alert(1)><a href="javascript:x">link</a> &lt;b&gt; <b>bold</b>'
        "<script>steal()</script><style>p{}</style></td>"
        '<td rowspan="2" colspan="x" style="y">z</td></tr></table>'
    )
    html = to_html(table, True)
    assert html == (
        '<table>\n<tr><td>link &lt;b&gt; bold</td><td rowspan="2">z</td></tr>\n</table>'
    )


def test_spans_are_clamped() -> None:
    table = parse_table("<table><tr><td colspan=100000 rowspan=0>a</td></tr></table>")
    cell = table.rows[0][0]
    assert (cell.colspan, cell.rowspan) == (100, 1)


@pytest.mark.parametrize(
    "content",
    [
        "<table><tr><td>a</td><td>b</td></tr><tr><td>1</td><td>2",
        "<table><tr><td>a<td>b<tr><td>1<td>2",
        "<table><tr><td>a</td><td>b</td></tr><tr><td>1</td><td>2</td></tr>",
    ],
)
def test_truncated_tables_are_closed(content) -> None:
    table = parse_table(content)
    assert table.closed_by_us
    assert render_table(table, "auto", True) == "| a | b |\n|---|---|\n| 1 | 2 |"


def test_pipes_and_breaks_in_cells() -> None:
    table = parse_table("<table><tr><td>a|b</td><td>x<br>y<br/>z</td></tr></table>")
    assert to_gfm(table, True) == "| a\\|b | x<br>y<br>z |\n|---|---|"
    assert to_html(table, True) == "<table>\n<tr><td>a|b</td><td>x<br>y<br>z</td></tr>\n</table>"


def test_math_in_cells() -> None:
    table = parse_table("<table><tr><td>\\(|x| < y\\)</td><td>$5</td></tr></table>")
    assert to_gfm(table, True) == "| $\\|x\\| < y$ | \\$5 |\n|---|---|"
    assert to_html(table, True) == "<table>\n<tr><td>$|x| &lt; y$</td><td>$5</td></tr>\n</table>"


def test_ragged_rows_are_padded() -> None:
    table = parse_table("<table><tr><td>a</td></tr><tr><td>1</td><td>2</td><td>3</td></tr></table>")
    assert to_gfm(table, True) == "| a |  |  |\n|---|---|---|\n| 1 | 2 | 3 |"


def test_text_around_table_and_caption() -> None:
    table = parse_table("Table 2 <table><caption>Cap</caption><tr><td>a</td></tr></table> note")
    assert (table.before, table.caption, table.after) == ("Table 2", "Cap", "note")


def test_no_table_tag_at_all() -> None:
    table = parse_table("just text")
    assert table.rows == []
    assert table.before == "just text"


def test_fast_path_equals_html_parser() -> None:
    samples = [
        SIMPLE,
        "<TABLE><TR><TH ROWSPAN=2>a</TH><td colspan='3'>b</td></TR><tr><td>c<br/>d</td></tr>",
        "<table><thead><tr><th>h</th></tr></thead><tbody><tr><td> x  y </td></tr></tbody></table>t",
        "pre <table><tr><td>a</td></tr></table> post",
    ]
    for sample in samples:
        assert parse_table(sample, fast=True) == parse_table(sample, fast=False), sample


def test_nested_tables_are_flattened() -> None:
    table = parse_table(
        "<table><tr><td>a<table><tr><td>in1</td><td>in2</td></tr></table></td><td>b</td></tr>"
        "</table>"
    )
    assert [[c.text for c in row] for row in table.rows] == [["a in1 in2", "b"]]


def test_merge_drops_repeated_header() -> None:
    first = parse_table("<table><tr><td>Year</td><td>N</td></tr><tr><td>2020</td><td>1</td></tr>")
    second = parse_table(
        "<table><tr><td>year</td><td>N</td></tr><tr><td>2021</td><td>2</td></tr></table>"
    )
    merged = merge_tables(first, second)
    assert [[c.text for c in row] for row in merged.rows] == [
        ["Year", "N"],
        ["2020", "1"],
        ["2021", "2"],
    ]
    third = parse_table("<table><tr><td>2022</td><td>3</td></tr></table>")
    assert len(merge_tables(merged, third).rows) == 4
