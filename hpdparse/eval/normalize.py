"""The normal forms OmniDocBench compares: text (letters, digits and CJK only, inline formulas as
Unicode), formulas (LaTeX without styling, spacing and delimiters, lower case) and tables (HTML
without styling attributes, header cells as data cells). Each follows OmniDocBench's
utils/data_preprocess.py."""

from __future__ import annotations

import html
import re
import unicodedata

from bs4 import BeautifulSoup
from pylatexenc.latex2text import LatexNodes2Text

_INLINE = re.compile(r"\$(.*?)\$|\\\((.*?)\\\)")
_ESCAPED = re.compile(r"\\([\\_&%^])")
_NOT_WORD = re.compile(r"[^\w\u4e00-\u9fff]")
_FORMULA_NOISE = [
    "\\mathbf",
    "\\mathrm",
    "\\mathnormal",
    "\\mathit",
    "\\mathbb",
    "\\mathcal",
    "\\mathscr",
    "\\mathfrak",
    "\\mathsf",
    "\\mathtt",
    "\\textbf",
    "\\text",
    "\\boldmath",
    "\\boldsymbol",
    "\\operatorname",
    "\\bm",
    "\\symbfit",
    "\\mathbfcal",
    "\\symbf",
    "\\scriptscriptstyle",
    "\\notag",
    "\\setlength",
    "\\coloneqq",
    "\\space",
    "\\thickspace",
    "\\thinspace",
    "\\medspace",
    "\\nobreakspace",
    "\\negmedspace",
    "\\quad",
    "\\qquad",
    "\\enspace",
    "\\substackw",
    " ",
    "$$",
    "\\left",
    "\\right",
    "\\displaystyle",
    "\\text",
]
_FORMULA_DROPS = [
    re.compile(r"\\tag\{.*?\}"),
    re.compile(r"\\hspace\{.*?\}"),
    re.compile(r"\\begin\{.*?\}"),
    re.compile(r"\\end\{.*?\}"),
    re.compile(r"\\arraycolsep.*?\}"),
]
_BRACKETS = re.compile(r"\\\[(.+?)(?<!\\)\\\]")
_TABLE_ATTRIBUTES = [
    re.compile(f'( {name}=".*?")') for name in ("style", "height", "width", "align", "class")
]
_TABLE_TAGS = [  # <sup>, </sup>, <sub>, </sub>... in that order
    *(tag for name in ("sup", "sub", "span", "div", "p") for tag in (f"<{name}>", f"</{name}>")),
    '<spandata-span-identity="">',
]


_LATEX_TO_TEXT = LatexNodes2Text()  # one converter: it keeps no state from one text to the next


def latex_to_text(latex: str) -> str:
    """LaTeX -> Unicode text (pylatexenc)."""
    return _LATEX_TO_TEXT.latex_to_text(latex)


def _inline_to_unicode(match: re.Match[str]) -> str:
    inner = match.group(1) if match.group(1) is not None else match.group(2)
    inner = _ESCAPED.sub("", inner)
    if not any(char in inner for char in "\\^_"):
        return match.group(0)
    if inner.endswith("\\"):
        inner += " "
    try:
        return latex_to_text(inner).strip()
    except Exception:  # a formula pylatexenc cannot read stays as it is
        return match.group(0)


def inline_math_to_unicode(text: str) -> str:
    """Inline formulas with a sub/superscript or a command become Unicode text; the others stay."""
    return _INLINE.sub(_inline_to_unicode, text)


def clean_string(text: str) -> str:
    """Letters, digits, `_` and CJK only (OmniDocBench's text normal form)."""
    for noise in ("\\t", "\\n", "\t", "\n", "/t", "/n"):
        text = text.replace(noise, "")
    return _NOT_WORD.sub("", text)


def normal_text(text: str) -> str:
    return clean_string(inline_math_to_unicode(text))


def normal_formula(latex: str) -> str:
    text = latex.strip().strip("$").strip("\n")
    bracketed = _BRACKETS.search(text)
    if bracketed:
        text = bracketed.group(1).strip()
    for pattern in _FORMULA_DROPS:
        text = pattern.sub("", text)
    text = text.strip(".")
    for noise in _FORMULA_NOISE:
        text = text.replace(noise, "")
    return text.lower()


def _plain_table_html(content: str) -> str:
    soup = BeautifulSoup(content, "html.parser")
    for cell in soup.find_all("th"):
        cell.name = "td"
    for tag in soup.find_all("thead"):
        tag.unwrap()
    for math in soup.find_all("math"):
        math.replace_with(f"${math.get('alttext', '')}$")
    for span in soup.find_all("span"):
        span.unwrap()
    return str(soup)


def normal_table(content: str) -> str:
    """An HTML table in the form TEDS and the table edit distance compare ('' when it holds no
    <table>)."""
    if "<table" not in content.replace(" ", "").replace("'", '"'):
        return ""
    text = html.unescape(_plain_table_html(content)).replace("\n", "")
    text = unicodedata.normalize("NFKC", text).strip()
    text = "".join(re.findall(r"<table\b[^>]*>(.*)</table>", text, re.DOTALL | re.IGNORECASE))
    for pattern in _TABLE_ATTRIBUTES:
        text = pattern.sub("", text)
    text = re.sub("</?tbody>", "", text)
    text = re.sub(r"\s+", " ", text)
    text = '<html><body><table border="1" >' + text + "</table></body></html>"
    for tag in _TABLE_TAGS:
        text = text.replace(tag, "")
    return re.sub("<colgroup>.*?</colgroup>", "", text)


def table_cell_texts(content: str) -> list[str]:
    """The texts of an unmatched predicted table's cells (OmniDocBench matches them as text)."""
    soup = BeautifulSoup(content, "html.parser")
    return [
        re.sub(r"\$\\cdot\$", "", cell.string).strip()
        for cell in soup.find_all("td")
        if cell.string
    ]
