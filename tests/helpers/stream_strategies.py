"""Hypothesis strategies for HPD page streams (shared by the tests and benchmarks/fuzz_stream.py),
and the Markdown safety checks every rendered document must pass."""

from __future__ import annotations

import json
import re

from hypothesis import strategies as st

from hpdparse.hpd.labels import LABEL_ROLES
from hpdparse.markdown.records import DocumentRecord
from hpdparse.markdown.render import RenderOptions, render_document
from tests.helpers.records import page_record

LABELS = sorted(LABEL_ROLES) + ["", "Doc-Title", "weird label", "x" * 70, "表格"]

FRAGMENTS = [
    "<BLOCK>",
    "<CHILD>",
    "<FORK>",
    "<|im_end|>",
    "<|endoftext|>",
    "<IMG_CONTEXT>",
    "[1, 2, 3, 4]",
    "[-5, 2000, 3.5, 1e9]",
    "[12, 34",
    "\\(",
    "\\)",
    "\\[",
    "\\]",
    "$$",
    "$",
    "\\tag{1}",
    "\\left(",
    "\\right)",
    "\\frac{a}{b",
    "\\begin{matrix}",
    "{",
    "}",
    "<table>",
    "</table>",
    "<tr>",
    "<td rowspan=2>",
    "<td colspan='3' style=x>",
    "</td>",
    "<th>",
    "<br>",
    "<div>",
    "</div>",
    "<img src=x onerror=alert(1)>",
    "<script>alert(1)</script>",
    "<!--",
    "-->",
    "--!>",
    "<a href='javascript:x'>",
    "&lt;",
    "&amp;",
    "|",
    "`",
    "```",
    "#",
    "> ",
    "- ",
    "1. ",
    "• ",
    "\n",
    "\n\n",
    " ",
    "[Non-Text]",
    "The image contains no text or characters.",
    "×",
    "÷",
    "≤",
    "α",
    "中文",
    "\x00",
    "\u202e",
    "word ",
    "loop loop loop loop loop loop loop loop loop loop loop loop loop loop loop loop ",
]

text_pieces = st.one_of(st.sampled_from(FRAGMENTS), st.text(max_size=20))

# Strategies are built once, here: hypothesis validates and caches a strategy object, so one
# made anew at every draw costs most of an example's time (the draws are the same either way).
_SOUP = st.lists(text_pieces, max_size=40)
_KINDS = st.sampled_from(["text", "math", "table", "soup", "loop"])
_TEXT = st.text(max_size=80)
_LATEX = st.lists(st.sampled_from(FRAGMENTS[9:22] + ["x", "+", "α"]), max_size=12)
_MATH_FORMS = st.sampled_from(["\\[\n{}\n\\]", "\\({}\\)", "{}", "\\[{}"])
_CELLS = st.lists(st.text(max_size=8), max_size=12)
_COLUMNS = st.integers(1, 4)
_TABLE_ENDS = st.sampled_from(["</table>", "", "</tr>"])
_UNIT = st.text(min_size=1, max_size=6)
_LOOP_LEAD = st.text(max_size=10)
_REPEATS = st.integers(5, 300)
_SHORT_SOUP = st.lists(text_pieces, max_size=10)


@st.composite
def random_streams(draw: st.DrawFn) -> str:
    """Token soup: grammar fragments and arbitrary text in any order."""
    return "".join(draw(_SOUP))


@st.composite
def block_content(draw: st.DrawFn) -> str:
    kind = draw(_KINDS)
    if kind == "text":
        return draw(_TEXT)
    if kind == "math":
        latex = "".join(draw(_LATEX))
        return draw(_MATH_FORMS).format(latex)
    if kind == "table":
        cells = draw(_CELLS)
        ncols = draw(_COLUMNS)
        rows = [cells[i : i + ncols] for i in range(0, len(cells), ncols)]
        html = "<table>" + "".join(
            "<tr>" + "".join(f"<td>{c}</td>" for c in row) + "</tr>" for row in rows
        )
        return html + draw(_TABLE_ENDS)
    if kind == "loop":
        unit = draw(_UNIT)
        return draw(_LOOP_LEAD) + unit * draw(_REPEATS)
    return "".join(draw(_SHORT_SOUP))


def _box(values: tuple[int, int, int, int]) -> str:
    return "[{}, {}, {}, {}]".format(*values)


_BOXES = st.one_of(
    st.tuples(*[st.integers(0, 1000)] * 4).map(_box),
    st.tuples(*[st.integers(-2000, 3000)] * 4).map(_box),
    st.sampled_from(["", "[1, 2, 3]", "[a, b, c, d]", "[1.5, 2.5, 900.2, 1000.9]"]),
)
_LABELS = st.sampled_from(LABELS)
_BLOCK_CONTENT = block_content()
_SEPARATORS = st.sampled_from(["", "\n", " "])
_EDITS = st.sampled_from(["cut", "insert", "delete", "truncate"])


@st.composite
def grammar_streams(draw: st.DrawFn) -> str:
    """A well-formed page built from the grammar, then corrupted."""
    blocks = []
    for _ in range(draw(st.integers(0, 12))):
        label = draw(_LABELS)
        box = draw(_BOXES)
        has_child = draw(st.booleans())
        content = draw(_BLOCK_CONTENT) if has_child else ""
        sep = draw(_SEPARATORS)
        blocks.append(f"<BLOCK>{label} {box}" + ("<CHILD>" + content if has_child else "") + sep)
    stream = "".join(blocks)
    for _ in range(draw(st.integers(0, 4))):
        if not stream:
            break
        op = draw(_EDITS)
        at = draw(st.integers(0, len(stream)))
        if op == "cut":
            stream = stream[:at]
        elif op == "insert":
            stream = stream[:at] + draw(text_pieces) + stream[at:]
        elif op == "delete":
            stream = stream[:at] + stream[at + draw(st.integers(1, 10)) :]
        else:
            stream = stream[: max(at, len(stream) // 2)]
    return stream


# --- Markdown checks -------------------------------------------------------------------------

_ALLOWED_TAG = re.compile(
    r'<(?:/?(?:table|tr|td|th)|(?:td|th)(?: (?:rowspan|colspan)="\d+")+)>|<br>'
)
_TAG_START = re.compile(r"<(?=[A-Za-z/!?])")
_COMMENT = re.compile(r"<!-- (?:(?!--).)* -->")
_FENCE = re.compile(r"^(`{3,})")


def markdown_outside_code(markdown: str) -> str:
    """The Markdown with fenced code blocks removed (their content is literal text)."""
    out, fence = [], None
    for line in markdown.split("\n"):
        match = _FENCE.match(line)
        if fence is None and match:
            fence = match.group(1)
            continue
        if fence is not None:
            if line.startswith(fence) and not line[len(fence) :].strip():
                fence = None
            continue
        out.append(line)
    return "\n".join(out)


def disallowed_html(markdown: str) -> list[str]:
    """Every `<` that starts markup other than our table tags, `<br>` and our comments."""
    text = markdown_outside_code(markdown)
    bad = []
    for match in _TAG_START.finditer(text):
        rest = text[match.start() :]
        if _ALLOWED_TAG.match(rest):
            continue
        comment = _COMMENT.match(rest)
        if comment and "\n" not in comment.group(0):
            continue
        bad.append(rest[:40])
    return bad


# --- what a Markdown renderer makes of it (markdown-it-py, CommonMark + tables, raw HTML on) ----

_MD_TAGS = frozenset(
    {"p", "h1", "h2", "h3", "h4", "h5", "h6", "ul", "ol", "li", "em", "strong", "code", "pre"}
    | {"a", "img", "table", "thead", "tbody", "tr", "th", "td", "br"}
)
_CROP = re.compile(r"images/page-\d{4}-[a-z]+-\d{2}\.png")
_MD_ATTRS = frozenset({"src", "alt", "href", "title", "rowspan", "colspan", "class", "start"})
_HTML_TAG = re.compile(r"<(/?)([A-Za-z][A-Za-z0-9]*)((?:[^>\"']|\"[^\"]*\"|'[^']*')*)>")
_HTML_ATTR = re.compile(
    r"([A-Za-z_:][-A-Za-z0-9_:.]*)(?:\s*=\s*(\"[^\"]*\"|'[^']*'|[^\s\"'=<>`]+))?"
)


def rendered_html_problems(markdown: str) -> list[str]:
    """Render the Markdown as a browser-bound renderer would (raw HTML allowed) and list every tag
    or attribute that did not come from Markdown syntax or our table markup."""
    from markdown_it import MarkdownIt

    html = MarkdownIt("commonmark", {"html": True}).enable("table").render(markdown)
    problems = []
    for match in _HTML_TAG.finditer(html):
        name = match.group(2).lower()
        if name not in _MD_TAGS:
            problems.append(match.group(0)[:60])
            continue
        for attr, value in _HTML_ATTR.findall(match.group(3)):
            attr = attr.lower()
            value = value.strip("\"'")
            bad_src = attr == "src" and not _CROP.fullmatch(value)
            bad_class = attr == "class" and not value.startswith("language-")
            if attr not in _MD_ATTRS or bad_src or bad_class:
                problems.append(match.group(0)[:60])
    return problems


options_strategy = st.builds(
    RenderOptions,
    keep_headers=st.booleans(),
    images=st.booleans(),
    table_format=st.sampled_from(["auto", "gfm", "html"]),
    math=st.sampled_from(["dollar", "latex"]),
    page_markers=st.booleans(),
)


def check_document(raws: list[str], finish: str, options: RenderOptions) -> None:
    pages = [
        page_record(i + 1, raw, width_px=800, height_px=1000, finish_reason=finish)
        for i, raw in enumerate(raws)
    ]
    doc = DocumentRecord(source="/in/x.pdf", stem="x", page_count=len(pages), pages=pages)
    rendered = render_document(doc, options)
    assert isinstance(rendered.markdown, str)
    rendered.markdown.encode("utf-8")  # valid UTF-8: no lone surrogates
    json.dumps(rendered.json, ensure_ascii=False).encode("utf-8")
    assert disallowed_html(rendered.markdown) == [], rendered.markdown
    assert rendered_html_problems(rendered.markdown) == [], rendered.markdown
    for crop in rendered.images:
        x1, y1, x2, y2 = crop.bbox_px
        assert 0 <= x1 < x2 <= 800 and 0 <= y1 < y2 <= 1000
        assert crop.filename.startswith("images/page-")
