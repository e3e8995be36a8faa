"""What `hpdparse eval` reads: the truth (an OmniDocBench JSON file, or a folder of reference
Markdown files) and, for each truth page, its prediction in PRED (a folder of Markdown files,
one per page or per document, or an output folder of `hpdparse convert`)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from hpdparse.eval.extract import page_elements
from hpdparse.eval.records import TruthBlock, TruthPage

_PAGE_MARKER = re.compile(r"^<!-- page (\d+)\b[^>]*-->\s*$", re.MULTILINE)
_PAGE_SUFFIX = re.compile(r"^(?P<doc>.+?)(?:\.pdf)?_(?P<index>\d+)$")


class TruthError(ValueError):
    """The truth cannot be read at all (one line: what and why)."""


def _valid(entry: Any) -> str | None:
    """Why an OmniDocBench page entry cannot be scored, or None."""
    if not isinstance(entry, dict):
        return "not an object"
    if not isinstance(entry.get("page_info"), dict) or "image_path" not in entry["page_info"]:
        return "no page_info.image_path"
    dets = entry.get("layout_dets")
    if not isinstance(dets, list) or not all(
        isinstance(d, dict) and "category_type" in d and "anno_id" in d for d in dets
    ):
        return "layout_dets is not a list of blocks with category_type and anno_id"
    return None


def _block(item: dict) -> TruthBlock:
    return TruthBlock(
        item["anno_id"],
        item["category_type"],
        item.get("order"),
        *(str(item.get(key, "")) for key in ("text", "latex", "html")),
        item.get("attribute", {}),
    )


def _truth_page(entry: dict) -> TruthPage:
    """An OmniDocBench page entry, read once: its blocks, the pairs of blocks linked as
    `truncated` (one text split across them) and the page attributes."""
    relations = entry.get("extra", {}).get("relation", [])
    attributes = entry["page_info"].get("page_attribute") or {}
    return TruthPage(
        Path(str(entry["page_info"]["image_path"])).name.rsplit(".", 1)[0],  # no extension
        [_block(item) for item in entry["layout_dets"]],
        [
            (r.get("source_anno_id"), r.get("target_anno_id"))
            for r in relations
            if r.get("relation_type") == "truncated"
        ],
        attributes if isinstance(attributes, dict) else {},
    )


def load_json_truth(path: Path) -> tuple[list[TruthPage], list[str]]:
    """The pages of an OmniDocBench JSON file, and a one-line reason for each entry left out."""
    try:
        entries = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise TruthError(f"{path}: cannot read: {exc}") from None
    except json.JSONDecodeError as exc:
        raise TruthError(f"{path}: not valid JSON: {exc}") from None
    if not isinstance(entries, list):
        raise TruthError(f"{path}: not an OmniDocBench file (a JSON list of page entries)")
    pages, problems = [], []
    for n, entry in enumerate(entries):
        reason = _valid(entry)
        if reason:
            problems.append(f"truth entry {n}: {reason}: left out")
            continue
        pages.append(_truth_page(entry))
    return pages, problems


def markdown_truth_page(name: str, markdown: str) -> TruthPage:
    """Reference Markdown -> an OmniDocBench page: paragraphs become text blocks, display
    formulas formula blocks, tables (HTML or pipe) table blocks, in the order they come. The
    page markers of hpdparse's Markdown are no text here either (`find_prediction`)."""
    markdown = _PAGE_MARKER.sub("", markdown)
    elements = sorted(
        (e for items in page_elements(markdown).values() for e in items), key=lambda e: e.start
    )
    blocks: list[TruthBlock] = []
    for element in elements:
        n, content = len(blocks), element.content
        if element.category == "text_all":
            blocks.append(TruthBlock(n, "text_block", n + 1, text=content))
        elif element.category == "html_table":
            blocks.append(TruthBlock(n, "table", n + 1, html=content))
        elif element.kind == "equation_isolated":
            blocks.append(TruthBlock(n, "equation_isolated", n + 1, latex=content))
        # inline formulas are part of their paragraph; LaTeX tables have no HTML
    return TruthPage(name, blocks)


def load_markdown_truth(folder: Path) -> tuple[list[TruthPage], list[str]]:
    pages, problems = [], []
    for path in sorted(folder.rglob("*.md")):
        name = path.relative_to(folder).with_suffix("").as_posix()
        try:
            pages.append(markdown_truth_page(name, path.read_text(encoding="utf-8")))
        except (OSError, UnicodeDecodeError) as exc:
            problems.append(f"truth {name}: cannot read ({exc}): left out")
    if not pages:
        raise TruthError(f"{folder}: no Markdown files (*.md) in it")
    return pages, problems


def load_truth(path: Path) -> tuple[list[TruthPage], list[str]]:
    if path.is_dir():
        return load_markdown_truth(path)
    if not path.exists():
        raise TruthError(f"{path}: no such file or folder")
    return load_json_truth(path)


def _split_pages(markdown: str) -> dict[int, str]:
    """A document's Markdown written with --page-markers -> {page number: its Markdown}."""
    parts = _PAGE_MARKER.split(markdown)  # the text before, then each marker's number and text
    return {int(number): text for number, text in zip(parts[1::2], parts[2::2], strict=True)}


def _candidates(pred: Path, name: str) -> list[Path]:
    """OmniDocBench's names first (<page>.md, nougat's .mmd, marker's without .pdf, MinerU's
    <page>.jpg.md), then an hpdparse document folder <name>/<name>.md."""
    bare = name.replace(".pdf", "")
    names = [f"{name}.md", f"{bare}.mmd", f"{bare}.md", f"{name}.jpg.md", f"{name}.png.md"]
    return [pred / n for n in names] + [pred / name / f"{Path(name).name}.md"]


def find_prediction(pred: Path, name: str) -> tuple[str | None, str]:
    """(the page's predicted Markdown, where it was found) or (None, why none). The page markers
    of an hpdparse document are not part of its text."""
    for path in _candidates(pred, name):
        if path.is_file():
            markdown = path.read_text(encoding="utf-8", errors="replace")
            return _PAGE_MARKER.sub("", markdown), str(path)
    # page <index> (0-based, as OmniDocBench names page images) of an hpdparse document
    match = _PAGE_SUFFIX.match(Path(name).name)
    doc = match.group("doc") if match else ""
    path = pred / doc / f"{doc}.md"
    if not match or not path.is_file():
        return None, "no prediction file"
    pages = _split_pages(path.read_text(encoding="utf-8", errors="replace"))
    number = int(match.group("index")) + 1
    if number in pages:
        return pages[number], f"{path} page {number}"
    if pages:
        return None, f"{path} has no page {number} (its pages: {', '.join(map(str, pages))})"
    return None, (
        f"{path} has no page markers: `hpdparse render {path.parent} --page-markers` "
        "adds them (no model needed)"
    )
