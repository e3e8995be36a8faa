"""Running text -> Markdown: inline math, escaping, line joining, sentinel texts."""

from __future__ import annotations

import html
import re

from hpdparse.markdown.formulas import (
    BARE_DOLLAR,
    HTML_START,
    clean_latex,
    display_math,
    inline_math,
    math_for_markdown,
)

# Texts the model writes when a region holds no text: dropped (hpd-model.md).
_SENTINELS = frozenset(
    {"[Non-Text]", "The image is too blurry to recognize any text content.", "[non-text]"}
)
_SENTINEL_PREFIX = "The image contains no text or characters."


def is_sentinel(text: str) -> bool:
    stripped = text.strip()
    return stripped in _SENTINELS or stripped.startswith(_SENTINEL_PREFIX)


CJK = re.compile(r"[\u2e80-\u9fff\uac00-\ud7af\uf900-\ufaff\uff00-\uffef]")
_NEWLINE = re.compile(r"[ \t]*\n\s*")
_SPACES = re.compile(r"[ \t\r\f\v\u00a0]{2,}")


def join_lines(text: str) -> str:
    """Soft line breaks -> one space (nothing between two CJK characters)."""
    if "\n" in text:

        def joiner(match: re.Match[str]) -> str:
            before = text[match.start() - 1 : match.start()]
            after = text[match.end() : match.end() + 1]
            if before and after and CJK.match(before) and CJK.match(after):
                return ""
            return " "

        text = _NEWLINE.sub(joiner, text)
    if "  " in text or "\t" in text:
        text = _SPACES.sub(" ", text)
    return text.strip()


# Inline `\( \)` and display `\[ \]` inside running text; an unclosed one runs to the end.
_MATH = re.compile(r"\\\((.*?)(?:\\\)|\Z)|\\\[(.*?)(?:\\\]|\Z)", re.S)

# Text without any of these, nor two spaces in a row, is returned as it is (stripped): the common
# case, made fast (a character class alone is scanned for quickly; with "|  " in the pattern every
# position is tried against both: over twice as slow on a paragraph).
_NEEDS_WORK = re.compile(r"[\\<>$|\n&\t\r\f\v\u00a0]")

MODE_MD = "md"  # a Markdown paragraph
MODE_GFM = "gfm"  # a GFM table cell: pipes escaped, breaks as <br>
MODE_HTML = "html"  # an HTML table cell: everything HTML-escaped, breaks as <br>
MODE_PLAIN = "plain"  # plain text (hpdparse.export): lines joined, math as $...$, nothing escaped


def render_inline(text: str, dollar: bool, mode: str = MODE_MD) -> str:
    """Text with inline math -> Markdown (or table cell) text. Math is cleaned and delimited per
    `dollar`; plain text is escaped so that it cannot open an HTML tag or start math."""
    if not _NEEDS_WORK.search(text) and "  " not in text:
        return text.strip()
    if mode in (MODE_MD, MODE_PLAIN):
        text = join_lines(text)
    out: list[str] = []
    pos = 0
    if "\\(" in text or "\\[" in text:
        for match in _MATH.finditer(text):
            out.append(_plain(text[pos : match.start()], dollar, mode))
            inline, display = match.group(1), match.group(2)
            latex, _ = clean_latex(inline if inline is not None else display or "", display=False)
            if latex:
                out.append(_math(latex, dollar, mode, display=inline is None))
            pos = match.end()
    out.append(_plain(text[pos:], dollar, mode))
    result = "".join(out)
    if mode not in (MODE_MD, MODE_PLAIN):
        result = result.strip().replace("\n", "<br>")
    return result


def _plain(text: str, dollar: bool, mode: str) -> str:
    if not text or mode == MODE_PLAIN:
        return text
    if mode == MODE_HTML:
        return html.escape(text, quote=False)
    if "<" in text:
        text = HTML_START.sub("&lt;", text)
    if dollar and "$" in text:
        text = BARE_DOLLAR.sub(r"\\$", text)
    if mode == MODE_GFM and "|" in text:
        text = text.replace("|", "\\|")
    return text


def _math(latex: str, dollar: bool, mode: str, display: bool) -> str:
    if mode == MODE_HTML:
        body = html.escape(math_for_markdown(latex, dollar), quote=False)
        return f"${body}$" if dollar else f"\\({body}\\)"
    if mode == MODE_PLAIN:
        return inline_math(" ".join(latex.split()), dollar=True)
    if mode == MODE_GFM:
        latex = " ".join(latex.split()).replace("|", "\\|")
        return inline_math(latex, dollar)
    if display:
        return display_math(latex, dollar).replace("\n", " ")
    return inline_math(latex, dollar)


_BLOCK_START = re.compile(
    r"^(#{1,6}(?=\s|$)|>|={3,}\s*$|(?:[-*_][ \t]*){3,}$|[-+*](?=\s|$)|`{3,}|~{3,}|\[[^\]]*\]:)"
)
_ORDERED_START = re.compile(r"^\d{1,9}(?=[.)](?:\s|$))")


def escape_block_start(text: str) -> str:
    """A paragraph must not turn into a heading, quote, list, rule, code fence or link definition
    by its first characters (what follows a list marker could open yet another block)."""
    if not text:
        return text
    if text[0] in "#>=-+*_`~[" and _BLOCK_START.match(text):
        return "\\" + text
    if text[0].isdigit():
        number = _ORDERED_START.match(text)
        if number:
            return text[: number.end()] + "\\" + text[number.end() :]
    return text


_BACKTICKS = re.compile(r"`{3,}")


def code_fence(text: str, language: str = "") -> str:
    """`text` as a fenced code block, its fence longer than any run of backticks in it."""
    longest = max((len(m) for m in _BACKTICKS.findall(text)), default=2)
    fence = "`" * max(3, longest + 1)
    return f"{fence}{language}\n{text}\n{fence}"
