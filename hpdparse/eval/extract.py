"""A page's Markdown -> its elements, the way OmniDocBench's end-to-end evaluation reads them.

Tables (LaTeX, HTML, then Markdown pipe tables, converted to HTML), display formulas, code blocks
and the paragraphs left over, each with its character position. Every step follows OmniDocBench's
reader (utils/extract.py and utils/table_utils.py there), quirks included, so that the same
Markdown gives the same elements: an extracted element is blanked out with spaces (inline
formulas are not: they are kept in their paragraph and also listed as `equation_inline`).
"""

from __future__ import annotations

import re

from hpdparse.eval.records import Element

_IMAGE = re.compile(r"!\[.*?\]\(.*?\)")
_FENCES = [re.compile(rf"^```{lang}\n?", re.MULTILINE) for lang in ("markdown", "html", "latex")]
_FENCE_END = re.compile(r"```\n?$", re.MULTILINE)
_DISPLAY = re.compile(r"\$\$(.*?)\$\$|\\\[(.*?)\\\]|\$(.*?)\$|\\\((.*?)\\\)", re.DOTALL)
_DOLLARS = re.compile(r"\$\$(.*?)\$\$|\$(.*?)\$|\\\((.*?)\\\)", re.DOTALL)
_TABLE_ENV = re.compile(r"\\begin{table}(.*?)\\end{table}", re.DOTALL)
_TABULAR_BEGIN, _TABULAR_END = re.compile(r"\\begin{tabular}"), re.compile(r"\\end{tabular}")
# OmniDocBench steps over a match by the length of these patterns' source text (a quirk kept).
_TABULAR_STEP, _TABULAR_SKIP = len(r"\\end{tabular}"), len(r"\\begin{tabular}")
_HTML_BEGIN, _HTML_END = re.compile(r"<table(?:[^>]*)>"), re.compile(r"</table>")
_HTML_STEP, _HTML_SKIP = len(r"</table>"), len(r"<table(?:[^>]*)>")
_PIPE_ROW = re.compile(r"\|\s*.*?\s*\|\n", re.DOTALL)
_HTML_TABLE = re.compile(r"(<table.*?</table>)", re.DOTALL)
_CODE = re.compile(r"```(\w+)\n(.*?)```", re.DOTALL)
_LATEX_STYLE = [
    (re.compile(r"\\title\{(.*?)\}"), r"\1"),
    (re.compile(r"\\title\s*\{\s*(.*?)\s*\}", re.DOTALL), r"\1"),
    (re.compile(r"\\text\s*\{\s*(.*?)\s*\}", re.DOTALL), r"\1"),
    (re.compile(r"\\section\*?\{(.*?)\}"), r"\1"),
    (re.compile(r"\\section\*?\{\s*(.*?)\s*\}", re.DOTALL), r"\1"),
]


def _blank(content: str, start: int, end: int) -> str:
    return content[:start] + " " * (end - start) + content[end:]


def prepare(content: str) -> str:
    """Images out, code fences of Markdown/HTML/LaTeX unwrapped, long runs of `_` and spaces
    shortened, <html>/<body> tags dropped."""
    content = _IMAGE.sub("", content)
    for fence in _FENCES:
        content = fence.sub("", content)
    content = _FENCE_END.sub("", content)
    content = re.sub(r"_{4,}", "____", content)
    content = re.sub(r" {4,}", "    ", content)
    for tag in ("<html>", "</html>", "<body>", "</body>"):
        content = content.replace(tag, "")
    return content


def balanced_spans(
    text: str, begin: re.Pattern[str], end: re.Pattern[str], step: int, skip: int
) -> list[tuple[int, int]]:
    """Outermost begin...end spans (nested ones inside them are part of them); when a begin is
    never closed, the search starts again just after the first open one."""
    spans: list[tuple[int, int]] = []
    pos, stack = 0, []
    while pos < len(text):
        opened, closed = begin.search(text, pos), end.search(text, pos)
        if not opened and not closed:
            break
        if opened and (not closed or opened.start() < closed.start()):
            stack.append(opened.start())
            pos = opened.start() + step
        elif closed:
            if stack:
                start = stack.pop()
                if not stack:
                    spans.append((start, closed.start() + step))
            pos = closed.start() + step
    if stack:
        restart = stack[0] + skip
        spans += [
            (s + restart, e + restart)
            for s, e in balanced_spans(text[restart:], begin, end, step, skip)
        ]
    return spans


def _latex_tables(content: str) -> list[tuple[int, str]]:
    """(start, LaTeX) of the table environments, then of the tabulars outside them; page order."""
    found = []
    for match in _TABLE_ENV.finditer(content):
        found.append((match.start(), match.group(0)))
        content = _blank(content, *match.span())
    spans = balanced_spans(content, _TABULAR_BEGIN, _TABULAR_END, _TABULAR_STEP, _TABULAR_SKIP)
    found += [(start, content[start:end]) for start, end in spans]
    return sorted(found, key=lambda item: item[0])


def _take_tables(content: str, elements: list[Element]) -> str:
    for start, table in _latex_tables(content):
        elements.append(Element("latex_table", start, table))
        content = _blank(content, start, start + len(table))
    for start, end in balanced_spans(content, _HTML_BEGIN, _HTML_END, _HTML_STEP, _HTML_SKIP):
        elements.append(Element("html_table", start, content[start:end]))
        content = _blank(content, start, end)
    return content


def _take_formulas(content: str, elements: list[Element]) -> str:
    for match in _DISPLAY.finditer(content):  # (none of its matches is empty)
        line = " ".join(match.group(0).strip().split("\n"))
        start, end = match.span()
        inner, fine = _DOLLARS.search(line), ""
        if inner is None:  # \[ ... \]
            content = _blank(content, start, end)
        elif inner.group(1):  # $$ ... $$
            line = _DOLLARS.sub(lambda m: "\\[" + (m.group(1) or "") + "\\]", line)
            content = _blank(content, start, end)
        else:  # $ ... $ or \( ... \): stays in the text too
            line = _DOLLARS.sub(
                lambda m: "\\[" + (m.group(2) or "") + (m.group(3) or "") + "\\]", line
            )
            fine = "equation_inline"
        elements.append(Element("equation_isolated", start, line, fine))
    return content


def _take_pipe_tables(content: str, elements: list[Element]) -> str:
    if len(_PIPE_ROW.findall(content + "\n")) < 2:
        return content
    content = pipe_tables_to_html(content)
    for match in _HTML_TABLE.finditer(content):
        content = _blank(content, *match.span())
        table = match.group(0).strip()
        elements.append(Element("html_table", match.start(), table, "md2html_table"))
    return content


def _take_code(content: str, elements: list[Element]) -> str:
    for match in _CODE.finditer(content):
        content = _blank(content, *match.span())
        elements.append(Element("text_all", match.start(), match.group(2).strip(), "code"))
    return content


def _paragraphs(content: str, elements: list[Element]) -> None:
    for pattern, replacement in _LATEX_STYLE:
        content = pattern.sub(replacement, content)
    parts = content.split("\n\n")
    if len(parts) == 1:
        parts = content.split("\n")
    offset = 0
    for part in parts:
        start = offset
        offset += len(part)  # without the separator: OmniDocBench's positions do the same
        text = "\n".join(line.strip() for line in part.strip().split("\n") if line.strip())
        if not text:
            continue
        if text.startswith("<table") and text.endswith("</table>"):
            elements.append(Element("html_table", start, text))
        elif text.startswith("$") and text.endswith("$"):
            if text.replace("$", "").strip():
                elements.append(Element("equation_isolated", start, text))
        else:
            elements.append(Element("text_all", start, text, "text_block"))


def page_elements(markdown: str) -> dict[str, list[Element]]:
    """The page's elements by category (text_all, equation_isolated, html_table, latex_table),
    each list in page order; the categories in the order they first occur."""
    elements: list[Element] = []
    content = _take_tables(prepare(markdown), elements)
    content = _take_formulas(content, elements)
    content = _take_pipe_tables(content, elements)
    content = _take_code(content, elements)
    _paragraphs(content, elements)
    grouped: dict[str, list[Element]] = {}
    for element in sorted(elements, key=lambda e: e.start):
        grouped.setdefault(element.category, []).append(element)
    return grouped


def _pipe_table_html(rows_text: str) -> str:
    rows = [row.strip() for row in rows_text.strip().split("\n")]
    out = "<table>\n  <thead>\n    <tr>\n"
    out += "".join(f"      <th>{cell.strip()}</th>\n" for cell in rows[0].split("|")[1:-1])
    out += "    </tr>\n  </thead>\n  <tbody>\n"
    for row in rows[2:]:
        out += "    <tr>\n"
        out += "".join(f"      <td>{cell.strip()}</td>\n" for cell in row.split("|")[1:-1])
        out += "    </tr>\n"
    return out + "  </tbody>\n</table>\n"


def _merge_table_block(block: str) -> str:
    block = re.sub(r"<!--[\s\S]*?-->", "", block)
    rows: list[str] = []
    for table in re.findall(r"<table>[\s\S]*?</table>", block):
        lines = [
            line.replace("<th>", "<td>").replace("</th>", "</td>") if "<th>" in line else line
            for line in table.split("\n")
        ]
        kept = [line for line in lines if not re.search(r"</?t(able|head|body)>", line)]
        if len(kept) > 2:
            rows.extend(kept)
    return "\n\n" + "<table>\n{}\n</table>".format("\n".join(rows)) + "\n\n"


def _join_table_lines(text: str) -> str:
    """Runs of lines holding converted tables become one table (OmniDocBench's line machine,
    which looks one line behind)."""
    out: list[str] = []
    in_table, block, last = False, "", ""
    for line in text.split("\n"):
        if "<table>" in line:
            in_table = True
            block += last
        elif in_table:
            # OmniDocBench's rule-row test (-*?: or --- or :-*?) is a ':' or a '---'
            if ":" not in last and "---" not in last and "</thead>" not in last:
                block += "\n" + last
            if "</table>" in last and "<table>" not in line:
                in_table = False
                out.append(_merge_table_block(block))
                block = ""
        else:
            out.append(last)
        last = line
    if last:
        if in_table or "</table>" in last:
            out.append(_merge_table_block(block + "\n" + last))
        else:
            out.append(last)
    return "\n".join(out)


def pipe_tables_to_html(content: str) -> str:
    """Markdown pipe tables -> HTML tables with explicit spans, as OmniDocBench converts them."""
    content = content.replace("\r", "") + "\n"
    for rows in _PIPE_ROW.findall(content):
        content = content.replace(rows, _pipe_table_html(rows), 1)
    content = _join_table_lines(content)
    return content.replace("<table>", '<table border="1" >').replace(
        "<td>", '<td colspan="1" rowspan="1">'
    )
