"""One colour per block role, shared by the layout overlay and the review pages."""

from __future__ import annotations

from hpdparse.hpd.labels import LABEL_ROLES, ROLE_TEXT
from hpdparse.hpd.stream import Block, ParsedPage

ROLE_COLOURS: dict[str, str] = {
    "title": "#d62728",
    "heading": "#ff7f0e",
    "text": "#1f77b4",
    "list": "#17becf",
    "table": "#2ca02c",
    "formula": "#9467bd",
    "formula_number": "#b48ed6",
    "figure": "#e377c2",
    "caption": "#8c564b",
    "code": "#9a9b10",
    "reference": "#393b79",
    "footnote": "#637939",
    "header": "#7f7f7f",
    "footer": "#7f7f7f",
    "page_number": "#a0a0a0",
    "aside": "#5f5f5f",
}

assert set(ROLE_COLOURS) == set(LABEL_ROLES.values())  # a colour for every role


def role_name(role: str) -> str:
    """The role as the pictures spell it ("page number"); unknown roles are text."""
    return (role if role in ROLE_COLOURS else ROLE_TEXT).replace("_", " ")


def rgb(role: str) -> tuple[float, float, float]:
    """The role's colour as PyMuPDF wants it: three floats in 0-1."""
    value = ROLE_COLOURS.get(role, ROLE_COLOURS[ROLE_TEXT]).lstrip("#")
    return tuple(int(value[i : i + 2], 16) / 255 for i in (0, 2, 4))  # type: ignore[return-value]


def css_class(role: str) -> str:
    return "r-" + (role if role in ROLE_COLOURS else ROLE_TEXT)


def role_css() -> str:
    """CSS custom properties giving each role class its colour (`.r-table{--c:#2ca02c}`)."""
    return "".join(f".{css_class(role)}{{--c:{value}}}" for role, value in ROLE_COLOURS.items())


def is_container(block: Block) -> bool:
    """A block the layout branch wrote without forking a child branch for it (no `<CHILD>`
    content): an image, a list or figure container. Every other block is a forked child."""
    return (
        block.content is None
        and block.html is None
        and block.latex is None
        and "sentinel" not in block.flags
    )


def roles_in(pages: list[ParsedPage]) -> list[str]:
    """The roles of the pages' blocks, in the palette's order."""
    present = {b.role for p in pages for b in p.blocks}
    return [role for role in ROLE_COLOURS if role in present]
