"""LaTeX from the model -> MathML that is safe to put in a page (browsers render MathML natively).

latex2mathml does the conversion. Its output is not trusted either: it copies `\\text{...}` into
the markup as it is (`\\text{<script>}` would come out as a script element) and turns `\\href`
into an `href` attribute. So the output is parsed and written again keeping MathML elements and
presentation attributes only, every text escaped. LaTeX it cannot convert is shown as code.
"""

from __future__ import annotations

import html
import xml.etree.ElementTree as ElementTree

from latex2mathml.converter import convert

MAX_LATEX = 20_000  # characters; longer formulas are shown as code

ELEMENTS = frozenset(
    {
        "math", "mrow", "mi", "mn", "mo", "ms", "mtext", "mspace", "msup", "msub", "msubsup",
        "mfrac", "msqrt", "mroot", "mover", "munder", "munderover", "mtable", "mtr", "mtd",
        "mlabeledtr", "mstyle", "mpadded", "mphantom", "menclose", "mfenced", "merror",
        "mmultiscripts", "mprescripts", "none", "semantics",
    }
)  # fmt: skip

ATTRIBUTES = frozenset(
    {
        "display", "mathvariant", "mathsize", "displaystyle", "scriptlevel", "columnalign",
        "rowalign", "columnlines", "rowlines", "columnspacing", "rowspacing", "frame",
        "framespacing", "equalrows", "equalcolumns", "columnspan", "rowspan", "stretchy",
        "fence", "separator", "separators", "open", "close", "lspace", "rspace", "accent",
        "accentunder", "movablelimits", "largeop", "symmetric", "minsize", "maxsize", "form",
        "width", "height", "depth", "voffset", "linethickness", "notation", "align",
    }
)  # fmt: skip


def latex_to_mathml(latex: str, display: bool = False) -> str:
    """MathML markup for `latex` (a `<math>` element), or the LaTeX as escaped code."""
    if not latex.strip() or len(latex) > MAX_LATEX:
        return latex_as_code(latex)
    try:
        markup = convert(latex, display="block" if display else "inline")
        root = ElementTree.fromstring(markup)
        return _write(root)
    except Exception:
        return latex_as_code(latex)


def latex_as_code(latex: str) -> str:
    return f'<code class="tex">{html.escape(latex, quote=False)}</code>'


def _local(tag: object) -> str:
    name = tag if isinstance(tag, str) else ""
    return name.rsplit("}", 1)[-1]


def _write(element: ElementTree.Element) -> str:
    name = _local(element.tag)
    inner = html.escape(element.text or "", quote=False)
    inner += "".join(_write(child) for child in element)
    tail = html.escape(element.tail or "", quote=False)
    if name not in ELEMENTS:
        return inner + tail  # an element that is not MathML: its text only
    attributes = "".join(
        f' {key}="{html.escape(value, quote=True)}"'
        for key, value in sorted(element.attrib.items())
        if _local(key) == key and key in ATTRIBUTES
    )
    return f"<{name}{attributes}>{inner}</{name}>{tail}"
