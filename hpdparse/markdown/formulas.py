"""LaTeX cleanups for the model's formulas, each a small function, plus delimiter handling.

The official HPD evaluation export applies these cleanups (second-hand description in
hpd-model.md). We keep the ones that make better Markdown and apply them in one place:
`clean_latex`. Scoring-only tricks of that export (demoting one-line display math to inline,
splitting adjacent inline formulas into paragraphs, `\\supset` -> `\\sqsupset`) are not applied.
"""

from __future__ import annotations

import re
import unicodedata
from functools import lru_cache

# --- delimiters ------------------------------------------------------------------------------

_DISPLAY_DELIMITERS = (("\\[", "\\]"), ("$$", "$$"))


def close_display(content: str) -> tuple[str, bool]:
    """A display formula that starts with `\\[` (or `$$`) but was cut before its closing delimiter
    gets one. Returns (content, closed_by_us)."""
    text = content.strip()
    for opener, closer in _DISPLAY_DELIMITERS:
        if text.startswith(opener) and (len(text) < 2 * len(opener) or not text.endswith(closer)):
            return text + "\n" + closer, True
    return text, False


_DISPLAY_SEGMENT = re.compile(r"\\\[(.*?)\\\]|\$\$(.*?)\$\$", re.S)


def split_display(content: str) -> tuple[list[str], bool]:
    """The LaTeX of an equation block, without delimiters: one entry per display formula
    (`\\[a\\]\\n\\[b\\]` gives two). Returns (formulas, closed_by_us)."""
    text, closed = close_display(content)
    segments = _DISPLAY_SEGMENT.findall(text)
    if segments and not _DISPLAY_SEGMENT.sub("", text).strip():
        formulas = [(a or b).strip() for a, b in segments]
        return [f for f in formulas if f], closed
    for opener, closer in (("\\(", "\\)"), ("$", "$")):
        if text.startswith(opener) and text.endswith(closer) and len(text) > 2 * len(opener):
            text = text[len(opener) : -len(closer)]
            break
    text = text.strip()
    return ([text] if text else []), closed


# --- cleanups (each one tested with the examples it exists for) --------------------------------

_TAG = re.compile(r"\\tag\*?\s*\{([^{}]*)\}")


def remove_tag(latex: str) -> tuple[str, str | None]:
    """`x=1 \\tag{3}` -> (`x=1`, `3`). Inline math cannot carry a tag; display math gets it back
    from `with_tag` so that equation numbers survive."""
    tags = _TAG.findall(latex)
    if not tags:
        return latex, None
    return _TAG.sub("", latex).strip(), tags[-1].strip()


def with_tag(latex: str, tag: str | None) -> str:
    """Attach an equation number as `\\tag{n}` (rendered by KaTeX and MathJax in display math)."""
    if not tag:
        return latex
    return f"{latex} \\tag{{{tag}}}"


_ELLIPSIS = r"(?:\\[lc]?dots[bcimo]?|\\cdots|\.\s*\.\s*\.|…|⋯)"
_REPEATED_ELLIPSES = re.compile(rf"({_ELLIPSIS})(?:\s*,?\s*{_ELLIPSIS})+\s*$")
_TRAILING_SPACING = re.compile(r"(?:\s*(?:\\q?quad|\\[,;:! ]|~|\\\\|\\hfill))+\s*$")


def drop_degenerate_tail(latex: str) -> str:
    """Degenerate endings of cut-off or looping formulas: `a+\\cdots\\cdots\\cdots` keeps one
    ellipsis; trailing `\\quad`, `\\,`, `~`, `\\\\` are removed."""
    text = latex.rstrip()
    for _ in range(3):
        before = text
        text = _TRAILING_SPACING.sub("", text)
        text = _REPEATED_ELLIPSES.sub(r"\1", text)
        if text == before:
            break
    return text


_TALL = re.compile(
    r"\\(?:[dt]?frac|over|atop|choose|sum|prod|coprod|int|iint|iiint|oint|begin|binom|sqrt|lim"
    r"|big(?:cup|cap|oplus|otimes|vee|wedge)|stackrel|overset|underset|matrix|array|substack"
    r"|overbrace|underbrace|displaystyle)(?![A-Za-z])|\^\s*\{[^{}]*[\^_]"
)
_LEFT_RIGHT = re.compile(r"\\left\s*([(\[])((?:(?!\\left|\\right).)*?)\\right\s*([)\]])", re.S)


def simplify_left_right(latex: str) -> str:
    """`\\left( x+1 \\right)` -> `(x+1)` when nothing tall (fractions, sums, matrices...) is inside;
    nested pairs are simplified from the inside out."""

    def plain(match: re.Match[str]) -> str:
        inner = match.group(2)
        if _TALL.search(inner):
            return match.group(0).replace("\\left", "\\LEFT").replace("\\right", "\\RIGHT")
        return f"{match.group(1)}{inner.strip()}{match.group(3)}"

    text = latex
    for _ in range(20):
        new = _LEFT_RIGHT.sub(plain, text)
        if new == text:
            break
        text = new
    return text.replace("\\LEFT", "\\left").replace("\\RIGHT", "\\right")


UNICODE_MACROS: dict[str, str] = {
    "×": "\\times",
    "÷": "\\div",
    "±": "\\pm",
    "∓": "\\mp",
    "·": "\\cdot",
    "⋅": "\\cdot",
    "≤": "\\leq",
    "⩽": "\\leq",
    "≥": "\\geq",
    "⩾": "\\geq",
    "≠": "\\neq",
    "≈": "\\approx",
    "≡": "\\equiv",
    "∼": "\\sim",
    "∝": "\\propto",
    "∞": "\\infty",
    "→": "\\rightarrow",
    "←": "\\leftarrow",
    "↔": "\\leftrightarrow",
    "⇒": "\\Rightarrow",
    "⇐": "\\Leftarrow",
    "⇔": "\\Leftrightarrow",
    "∈": "\\in",
    "∉": "\\notin",
    "∋": "\\ni",
    "⊂": "\\subset",
    "⊃": "\\supset",
    "⊆": "\\subseteq",
    "⊇": "\\supseteq",
    "∪": "\\cup",
    "∩": "\\cap",
    "∅": "\\emptyset",
    "∀": "\\forall",
    "∃": "\\exists",
    "¬": "\\neg",
    "∧": "\\wedge",
    "∨": "\\vee",
    "⊕": "\\oplus",
    "⊗": "\\otimes",
    "∑": "\\sum",
    "∏": "\\prod",
    "∫": "\\int",
    "∮": "\\oint",
    "∂": "\\partial",
    "∇": "\\nabla",
    "√": "\\surd",
    "°": "^{\\circ}",
    "…": "\\ldots",
    "⋯": "\\cdots",
    "−": "-",
    "∗": "*",
    "′": "'",
    "″": "''",
}


def _greek_macro(letter: str) -> str:
    """`α` -> `\\alpha`, `Γ` -> `\\Gamma`: LaTeX names a Greek letter as Unicode does (but for
    "lambda"); ε and φ are the forms LaTeX calls \\varepsilon and \\varphi."""
    name = unicodedata.name(letter).split()[-1].lower().replace("lamda", "lambda")
    if letter.isupper():
        return "\\" + name.capitalize()
    return "\\" + ("var" + name if name in ("epsilon", "phi") else name)


UNICODE_MACROS.update((c, _greek_macro(c)) for c in "αβγδεζηθικλμνξπρστυφχψωΓΔΘΛΞΠΣΦΨΩ")
_UNICODE = re.compile("[" + "".join(re.escape(c) for c in UNICODE_MACROS) + "]")


def unicode_to_latex(latex: str) -> str:
    """Unicode operators and Greek letters inside math -> LaTeX macros (`a×b` -> `a\\times b`)."""
    if not _UNICODE.search(latex):
        return latex

    def macro(match: re.Match[str]) -> str:
        replacement = UNICODE_MACROS[match.group(0)]
        nxt = latex[match.end() : match.end() + 1]
        if replacement[-1].isalpha() and (nxt.isalnum() or nxt == "_"):
            return replacement + " "
        return replacement

    return _UNICODE.sub(macro, latex)


_ENV = re.compile(r"\\(begin|end)\s*\{([A-Za-z*]+)\}")


def balance_braces(latex: str) -> str:
    """Close what a cut-off formula left open: unmatched `{` get `}`, stray `}` are dropped,
    `\\begin{env}` without `\\end{env}` gets one."""
    text = latex
    if text.endswith("\\") and (len(text) - len(text.rstrip("\\"))) % 2 == 1:
        text = text[:-1]  # a lone trailing backslash
    depth = 0
    stray: list[int] = []
    for match in _BRACE.finditer(text):
        brace = match.group(0)
        if brace == "{":
            depth += 1
        elif brace == "}":
            if depth == 0:
                stray.append(match.start())
            else:
                depth -= 1
    for index in reversed(stray):
        text = text[:index] + text[index + 1 :]
    text += "}" * depth
    if "\\begin" in text:
        stack: list[str] = []
        for kind, env in _ENV.findall(text):
            if kind == "begin":
                stack.append(env)
            elif stack and stack[-1] == env:
                stack.pop()
        for env in reversed(stack):
            text += f"\\end{{{env}}}"
    return text


_BRACE = re.compile(r"\\\\|\\[{}]|[{}]")  # escaped backslash, escaped brace, or a brace


_ARITHMETIC = re.compile(r"^[\d\s.,+\-−×÷*/=<>≤≥≠≈()%]+$")
_OPERATOR = re.compile(r"[+×÷*=−]|\d\s*[-/]\s*\d")


def wrap_arithmetic(text: str) -> str | None:
    """A text block that is pure arithmetic (`12 ÷ 4 = 3`), or holds `÷` and no math at all, is
    math: returns it wrapped as `\\( ... \\)`, else None."""
    stripped = text.strip()
    if not stripped or "\\(" in stripped or "$" in stripped:
        return None
    if (
        _ARITHMETIC.match(stripped)
        and _OPERATOR.search(stripped)
        and any(c.isdigit() for c in stripped)
    ):
        return f"\\({stripped}\\)"
    if "÷" in stripped and "\n" not in stripped and len(stripped) <= 200:
        return f"\\({stripped}\\)"
    return None


@lru_cache(maxsize=4096)
def clean_latex(latex: str, display: bool) -> tuple[str, str | None]:
    """All cleanups, in order. Returns (latex, equation tag or None). Cached: a table cell's math
    is cleaned for both its GFM and its HTML form."""
    text, tag = remove_tag(latex)
    text = unicode_to_latex(text)
    text = drop_degenerate_tail(text)
    text = balance_braces(text)
    text = simplify_left_right(text)
    text = text.strip()
    if not display:
        text = " ".join(text.split())
    return text, tag


# --- output ------------------------------------------------------------------------------------

HTML_START = re.compile(r"<(?=[A-Za-z/!?])")  # `<` that could open an HTML tag
BARE_DOLLAR = re.compile(r"(?<!\\)\$")


def math_for_markdown(latex: str, dollar: bool) -> str:
    """Make LaTeX safe inside Markdown: `<` before a letter cannot start an HTML tag, and a bare
    `$` cannot end the math early."""
    text = HTML_START.sub(r"\\lt ", latex) if "<" in latex else latex
    if dollar and "$" in text:
        text = BARE_DOLLAR.sub(r"\\$", text)
    return text


_BLANK_LINES = re.compile(r"\n\s*\n")


# A line inside display math that a Markdown parser without math support would read as a block
# of its own (quote, heading, list item, setext underline, fence).
_BLOCK_LINE = re.compile(r"\s*(?:[>#=]|[-+*](?:\s|$)|\d{1,9}[.)](?:\s|$)|[-_*]{2,}|`{3,}|~{3,})")
_COMMENT_PERCENT = re.compile(r"(?<!\\)%")


def protect_display_lines(body: str) -> str:
    """Keep multi-line LaTeX one Markdown paragraph: a line that would start a Markdown block is
    joined to the line before it (newlines are plain spaces in LaTeX; a bare `%`, which would
    then comment out the joined text, becomes `\\%`). A first line of that kind gets a leading
    empty group `{}`."""
    if "%" in body:
        body = _COMMENT_PERCENT.sub(r"\\%", body)
    lines: list[str] = []
    for line in body.split("\n"):
        if lines and _BLOCK_LINE.match(line):
            lines[-1] = f"{lines[-1]} {line.strip()}"
        else:
            lines.append(line)
    if lines and _BLOCK_LINE.match(lines[0]):
        lines[0] = "{}" + lines[0].lstrip()
    return "\n".join(lines)


def display_math(latex: str, dollar: bool) -> str:
    # A blank line would end the Markdown paragraph in the middle of the formula.
    body = _BLANK_LINES.sub("\n", math_for_markdown(latex, dollar))
    body = protect_display_lines(body)
    return f"$$\n{body}\n$$" if dollar else f"\\[\n{body}\n\\]"


def inline_math(latex: str, dollar: bool) -> str:
    body = math_for_markdown(latex, dollar)
    return f"${body}$" if dollar else f"\\({body}\\)"
