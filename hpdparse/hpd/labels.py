"""Block labels of both vocabularies (MinerU-2.5 style and PaddleOCR style) mapped to roles.

The model has no official label list; every label we have seen or expect is mapped here to one of a
small set of roles that the renderer understands. Unknown labels get the role `text`.
"""

from __future__ import annotations

ROLE_TITLE = "title"  # the document title: "#"
ROLE_HEADING = "heading"  # section titles: "##", "###"... by numbering
ROLE_TEXT = "text"
ROLE_LIST = "list"  # a container; its items follow as text blocks inside its box
ROLE_TABLE = "table"
ROLE_FORMULA = "formula"
ROLE_FORMULA_NUMBER = "formula_number"
ROLE_FIGURE = "figure"  # image, chart, seal: cropped from the page image
ROLE_CAPTION = "caption"
ROLE_CODE = "code"
ROLE_REFERENCE = "reference"
ROLE_FOOTNOTE = "footnote"
ROLE_HEADER = "header"
ROLE_FOOTER = "footer"
ROLE_PAGE_NUMBER = "page_number"
ROLE_ASIDE = "aside"  # side notes in the margin

# Roles kept out of the Markdown unless the user asks for headers (always kept in the JSON).
PAGE_FURNITURE = frozenset({ROLE_HEADER, ROLE_FOOTER, ROLE_PAGE_NUMBER, ROLE_ASIDE})

LABEL_ROLES: dict[str, str] = {
    # MinerU 2.5 style
    "text": ROLE_TEXT,
    "title": ROLE_HEADING,
    "doc_title": ROLE_TITLE,
    "paragraph_title": ROLE_HEADING,
    "ref_text": ROLE_REFERENCE,
    "phonetic": ROLE_TEXT,
    "header": ROLE_HEADER,
    "footer": ROLE_FOOTER,
    "page_number": ROLE_PAGE_NUMBER,
    "aside_text": ROLE_ASIDE,
    "page_footnote": ROLE_FOOTNOTE,
    "list": ROLE_LIST,
    "index": ROLE_TEXT,
    "image_caption": ROLE_CAPTION,
    "table_caption": ROLE_CAPTION,
    "code_caption": ROLE_CAPTION,
    "image_footnote": ROLE_FOOTNOTE,
    "table_footnote": ROLE_FOOTNOTE,
    "image": ROLE_FIGURE,
    "image_block": ROLE_FIGURE,
    "table": ROLE_TABLE,
    "chart": ROLE_FIGURE,
    "code": ROLE_CODE,
    "algorithm": ROLE_CODE,
    "equation": ROLE_FORMULA,
    "equation_block": ROLE_FORMULA,
    "interline_equation": ROLE_FORMULA,
    # PaddleOCR style
    "formula": ROLE_FORMULA,
    "display_formula": ROLE_FORMULA,
    "formula_number": ROLE_FORMULA_NUMBER,
    "footnote": ROLE_FOOTNOTE,
    "vision_footnote": ROLE_FOOTNOTE,
    "seal": ROLE_FIGURE,
    "header_image": ROLE_HEADER,
    "footer_image": ROLE_FOOTER,
    "figure_title": ROLE_CAPTION,
    "chart_title": ROLE_CAPTION,
    "abstract": ROLE_TEXT,
    "reference": ROLE_REFERENCE,
    "reference_content": ROLE_REFERENCE,
    "content": ROLE_TEXT,
    "number": ROLE_PAGE_NUMBER,
    "figure": ROLE_FIGURE,
    "picture": ROLE_FIGURE,
    "caption": ROLE_CAPTION,
    "section_header": ROLE_HEADING,
    "paragraph": ROLE_TEXT,
    "list_item": ROLE_TEXT,
}

# Figure kinds used in crop file names (images/page-0003-<kind>-01.png).
FIGURE_KINDS: dict[str, str] = {"chart": "chart", "seal": "seal"}

# Captions that describe a figure (used as the image link's alt text).
FIGURE_CAPTION_LABELS = frozenset({"image_caption", "figure_title", "chart_title", "caption"})


def normalize_label(label: str) -> str:
    """Lower-case, with spaces and hyphens as underscores: `Doc-Title` -> `doc_title`."""
    return label.strip().lower().replace("-", "_").replace(" ", "_")


def role_of(label: str) -> str:
    """The role of a (normalized) label; unknown labels are text."""
    return LABEL_ROLES.get(label, ROLE_TEXT)


def figure_kind(label: str) -> str:
    """`figure`, `chart` or `seal`: the kind that names a crop file."""
    return FIGURE_KINDS.get(label, "figure")
