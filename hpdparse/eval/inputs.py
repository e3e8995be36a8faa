"""What `hpdparse eval` reads: the truth (an OmniDocBench JSON file, or a folder of reference
Markdown files) and, for each truth page, its prediction in PRED (a folder of Markdown files,
one per page or per document, or an output folder of `hpdparse convert`)."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hpdparse.eval.extract import page_elements

_PAGE_MARKER = re.compile(r"^<!-- page (\d+)\b[^>]*-->\s*$", re.MULTILINE)
_PAGE_SUFFIX = re.compile(r"^(?P<doc>.+?)(?:\.pdf)?_(?P<index>\d+)$")


class TruthError(ValueError):
    """The truth cannot be read at all (one line: what and why)."""


@dataclass
class TruthPage:
    name: str  # the page image's name without its extension (or the Markdown file's stem)
    page: dict[str, Any]  # an OmniDocBench page entry (layout_dets, extra, page_info)
    attributes: dict[str, Any] = field(default_factory=dict)


def _page_name(entry: Any) -> str:
    image = Path(str(entry["page_info"]["image_path"])).name
    return image.rsplit(".", 1)[0] if "." in image else image


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
        attributes = entry["page_info"].get("page_attribute") or {}
        pages.append(
            TruthPage(_page_name(entry), entry, attributes if isinstance(attributes, dict) else {})
        )
    return pages, problems


def markdown_truth_page(name: str, markdown: str) -> TruthPage:
    """Reference Markdown -> an OmniDocBench page: paragraphs become text blocks, display
    formulas formula blocks, tables (HTML or pipe) table blocks, in the order they come."""
    elements = sorted(
        (e for items in page_elements(markdown).values() for e in items),
        key=lambda e: e["position"][0],
    )
    blocks = []
    for element in elements:
        category, content = element["category_type"], element["content"]
        block: dict[str, Any] = {"anno_id": len(blocks), "order": len(blocks) + 1}
        if category == "text_all":
            block.update(category_type="text_block", text=content)
        elif category == "html_table":
            block.update(category_type="table", html=content)
        elif (
            category == "equation_isolated"
            and element.get("fine_category_type") != "equation_inline"
        ):
            block.update(category_type="equation_isolated", latex=content)
        else:  # inline formulas are part of their paragraph; LaTeX tables have no HTML
            continue
        blocks.append(block)
    page = {"layout_dets": blocks, "extra": {"relation": []}, "page_info": {"image_path": name}}
    return TruthPage(name, page)


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
    marks = list(_PAGE_MARKER.finditer(markdown))
    return {
        int(m.group(1)): markdown[m.end() : marks[i + 1].start() if i + 1 < len(marks) else None]
        for i, m in enumerate(marks)
    }


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
    match = _PAGE_SUFFIX.match(Path(name).name)
    if match:  # page <index> (0-based, as OmniDocBench names page images) of an hpdparse document
        doc = match.group("doc")
        path = pred / doc / f"{doc}.md"
        if path.is_file():
            pages = _split_pages(path.read_text(encoding="utf-8", errors="replace"))
            number = int(match.group("index")) + 1
            if number in pages:
                return pages[number], f"{path} page {number}"
            if pages:
                return (
                    None,
                    f"{path} has no page {number} (its pages: {', '.join(map(str, pages))})",
                )
            return None, (
                f"{path} has no page markers: `hpdparse render {path.parent} --page-markers` "
                "adds them (no model needed)"
            )
    return None, "no prediction file"
