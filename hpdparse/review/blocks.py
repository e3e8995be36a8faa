"""One block of the JSON -> the HTML the review page shows for it: its Markdown as the converter
writes it (hpdparse.markdown), rendered by markdown-it-py with raw HTML off, tables rebuilt from
their sanitised cells, math as MathML.

Nothing the model wrote reaches the page unescaped: markdown-it escapes HTML, links and images
are not parsed (their text shows as written), table cells and MathML are rebuilt from text.
"""

from __future__ import annotations

import base64
import html
import re
from pathlib import Path
from typing import Any

from markdown_it import MarkdownIt
from mdit_py_plugins.dollarmath import dollarmath_plugin

from hpdparse.hpd.stream import Block
from hpdparse.markdown.lists import is_ordered, render_list, split_items
from hpdparse.markdown.tables import html_rows, parse_table
from hpdparse.markdown.text import escape_block_start, render_inline
from hpdparse.review.mathml import latex_to_mathml

MAX_CROP_BYTES = 20 << 20


def _add_math(md: MarkdownIt) -> MarkdownIt:
    dollarmath_plugin(
        md, allow_labels=False, allow_space=True, allow_digits=True, double_inline=True
    )

    def rule(markup: str, display: bool) -> Any:
        def render(self: Any, tokens: list, idx: int, options: Any, env: Any) -> str:
            return markup.format(latex_to_mathml(tokens[idx].content, display))

        return render

    md.add_render_rule("math_inline", rule("{}", False))
    md.add_render_rule("math_inline_double", rule('<span class="display">{}</span>', True))
    md.add_render_rule("math_block", rule('<div class="display">{}</div>', True))
    return md


def make_markdown() -> MarkdownIt:
    """CommonMark with GFM tables and `$`/`$$` math; no raw HTML, links, images or autolinks."""
    md = MarkdownIt("commonmark", {"html": False, "linkify": False, "typographer": False})
    md.enable("table")
    md.disable(["link", "image", "autolink", "reference", "html_inline", "html_block"])
    return _add_math(md)


def make_cell_markdown() -> MarkdownIt:
    """Text with `$` math only, for table cells: the converter writes their text as it is (HTML
    escaped) with the math already between `$`, and no other Markdown applies inside HTML."""
    return _add_math(MarkdownIt("zero", {"html": False}))


def text_html(md: MarkdownIt, text: str) -> str:
    """A paragraph of model text, as the converter would write it, rendered."""
    return md.render(escape_block_start(render_inline(text, True)))


def inline_html(md: MarkdownIt, text: str) -> str:
    return md.renderInline(render_inline(text, True))


def table_html(md: MarkdownIt, table_markup: str) -> str:
    """The table rebuilt from its cells (spans kept), each cell's text and math rendered."""
    cell_md = make_cell_markdown()
    table = parse_table(table_markup)
    parts = [f"<p>{inline_html(md, t)}</p>" for t in (table.before, table.caption) if t]
    rows = html_rows(
        table, lambda text: "<br>".join(cell_md.renderInline(line) for line in text.split("\n"))
    )
    if rows:
        parts.append('<table class="tbl">' + "".join(rows) + "</table>")
    if table.after:
        parts.append(f"<p>{inline_html(md, table.after)}</p>")
    return "".join(parts)


def formula_html(latex: str, tag: str | None) -> str:
    """Display math, one per formula (a blank line separates them), the tag beside the last."""
    formulas = [f for f in re.split(r"\n\s*\n", latex) if f.strip()]
    parts = [f'<div class="display">{latex_to_mathml(f, display=True)}</div>' for f in formulas]
    if tag:
        parts.append(f'<span class="eqno">({html.escape(tag, quote=False)})</span>')
    return '<div class="formula">' + "".join(parts) + "</div>"


CROP_NAME = re.compile(r"images/page-\d{4,}-(?:figure|chart|seal)-\d{2,}\.png")


def crop_html(doc_dir: Path, name: str) -> str:
    """The crop `name` (images/page-0002-figure-01.png) of the document's folder, embedded; a
    note when it is missing or too large."""
    if CROP_NAME.fullmatch(name):
        path = doc_dir / name
        try:
            if path.stat().st_size <= MAX_CROP_BYTES:
                data = base64.b64encode(path.read_bytes()).decode("ascii")
                return f'<img class="crop" alt="" src="data:image/png;base64,{data}">'
        except OSError:
            pass
    return f'<p class="none">{html.escape(name)} is missing</p>'


def figure_html(doc_dir: Path, block: Block) -> str:
    """The figure's crop from images/, embedded; a note when there is none."""
    name = block.image
    if isinstance(name, str) and CROP_NAME.fullmatch(name):
        return crop_html(doc_dir, name)
    if block.container_of is not None:
        return f'<p class="none">container of block {int(block.container_of)}</p>'
    return '<p class="none">figure (not cropped)</p>'


def list_html(md: MarkdownIt, text: str) -> str:
    items = split_items(text)
    return md.render(render_list(items, is_ordered(items), True))


def block_html(md: MarkdownIt, doc_dir: Path, block: Block) -> str:
    """The HTML of one block, by its role."""
    role = block.role
    text = block.text
    if role == "table" and isinstance(block.html, str):
        return table_html(md, block.html)
    if role == "formula" and isinstance(block.latex, str):
        return formula_html(block.latex, block.tag)
    if role == "figure":
        return figure_html(doc_dir, block)
    if not isinstance(text, str):
        if "sentinel" in block.flags:
            return '<p class="none">no text (the model said the region has none)</p>'
        if role == "list" and block.items:
            return f'<p class="none">list of {len(block.items)} items (the blocks below)</p>'
        return '<p class="none">no content</p>'
    if role in ("title", "heading"):
        level = min(3 + int(block.level or 0), 6)
        return f"<h{level}>{inline_html(md, text)}</h{level}>"
    if role == "code":
        return f"<pre><code>{html.escape(text, quote=False)}</code></pre>"
    if role == "list":
        return list_html(md, text)
    return text_html(md, text)
