"""PDF page labels (/PageLabels): the page numbers a reader shows, such as "iv" or "A-3"."""

from __future__ import annotations

import re

from hpdparse.sources.mupdf import pymupdf


def label_rules(doc: pymupdf.Document) -> list[tuple[int, str, str, int]]:
    """The document's /PageLabels as (first page index, style, prefix, first number), sorted."""
    try:
        raw = doc.get_page_labels()
    except Exception:
        return []
    rules = []
    for rule in raw:
        prefix = _decode_pdf_string(rule.get("prefix") or "")
        first = rule.get("firstpagenum") or 1
        rules.append((int(rule.get("startpage", 0)), rule.get("style") or "", prefix, int(first)))
    return sorted(rules)


def _decode_pdf_string(text: str) -> str:
    # PyMuPDF hands hex strings such as <FEFF0043> (UTF-16BE "C") over undecoded.
    match = re.fullmatch(r"<([0-9A-Fa-f\s]*)>", text)
    if not match:
        return text
    data = bytes.fromhex("".join(match.group(1).split()))
    if data.startswith(b"\xfe\xff"):
        return data[2:].decode("utf-16-be", errors="replace")
    return data.decode("latin-1")


def page_label(rules: list[tuple[int, str, str, int]], index: int) -> str | None:
    """The label of the page at 0-based `index` (PDF 32000-1:2008, 12.4.2)."""
    current = None
    for rule in rules:
        if rule[0] > index:
            break
        current = rule
    if current is None:
        return None
    start, style, prefix, first = current
    number = first + index - start
    if style == "D":
        numeral = str(number)
    elif style in ("r", "R"):
        numeral = _roman(number)
    elif style in ("a", "A") and number >= 1:
        numeral = chr(ord("A") + (number - 1) % 26) * ((number - 1) // 26 + 1)
    else:
        numeral = ""
    return (prefix + (numeral.lower() if style in ("r", "a") else numeral)) or None


def _roman(number: int) -> str:
    if number < 1:
        return str(number)
    parts = []
    for value, symbol in (
        (1000, "M"), (900, "CM"), (500, "D"), (400, "CD"), (100, "C"), (90, "XC"),
        (50, "L"), (40, "XL"), (10, "X"), (9, "IX"), (5, "V"), (4, "IV"), (1, "I"),
    ):  # fmt: skip
        count, number = divmod(number, value)
        parts.append(symbol * count)
    return "".join(parts)
