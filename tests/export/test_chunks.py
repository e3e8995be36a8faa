"""`<stem>.chunks.jsonl` from the golden raw-page cases: every content block is in exactly one
chunk, no chunk is over the token limit unless it is one block larger than the limit, chunks
follow reading order, and their heading paths are the Markdown's headings above them."""

from __future__ import annotations

import itertools
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("docling_core")

from docling_core.types.doc import (
    DocItemLabel,
    PictureItem,
    SectionHeaderItem,
    TitleItem,
)

from hpdparse.export.chunks import chunk_records, records_of
from hpdparse.export.docling import to_docling
from hpdparse.export.files import build_exports
from hpdparse.export.pages import Frame
from hpdparse.export.tokenizers import TokenizerError, load_tokenizer, token_counter
from hpdparse.hpd.stream import BlockRef
from hpdparse.markdown.render import RenderOptions
from hpdparse.markdown.text import render_inline
from hpdparse.markdown.units import BODY_KINDS, Kind
from tests.export.export_cases import CASES, exported, hybrid_chunks, markdown_headings, rendered
from tests.helpers.paths import REPO

NAMES = sorted(CASES)
LIMITS = [16, 64, 512]


def records(name: str, limit: int, tokenizer: str | None = None) -> list[dict]:
    return chunk_records(exported(name), limit, tokenizer)


def content_blocks(name: str) -> set[BlockRef]:
    """Blocks whose text is in the body: all but headings (they are the chunks' heading paths),
    page furniture, and figures without a caption (no text to retrieve)."""
    export = exported(name)
    blocks: set[BlockRef] = set()
    for item, _ in export.document.iterate_items():
        if isinstance(item, TitleItem | SectionHeaderItem):
            continue
        if isinstance(item, PictureItem) and not item.captions:
            continue
        blocks.update(export.refs.get(item.self_ref, []))
    return blocks


def chunk_refs(record: dict) -> list[BlockRef]:
    return [BlockRef(b["page"], b["block"]) for b in record["blocks"]]


@pytest.mark.parametrize("limit", LIMITS)
@pytest.mark.parametrize("name", NAMES)
def test_every_content_block_is_in_exactly_one_chunk(name: str, limit: int) -> None:
    seen: dict[BlockRef, str] = {}
    for record in records(name, limit):
        for ref in chunk_refs(record):
            assert ref not in seen, f"{ref} in {seen[ref]} and {record['id']}"
            seen[ref] = record["id"]
    headings = {
        ref
        for item, _ in exported(name).document.iterate_items()
        if isinstance(item, TitleItem | SectionHeaderItem)
        for ref in exported(name).refs[item.self_ref]
    }
    assert set(seen) - headings == content_blocks(name) - headings


@pytest.mark.parametrize("limit", LIMITS)
@pytest.mark.parametrize("name", NAMES)
def test_chunks_stay_under_the_limit_unless_one_block_is_larger(name: str, limit: int) -> None:
    count = token_counter(load_tokenizer(None, limit))
    for record in records(name, limit):
        context = "\n\n".join([*record["headings"], record["text"]])
        assert abs(record["tokens"] - count(context)) <= 2
        assert record["oversize"] == (record["tokens"] > limit)
        if record["oversize"]:
            # One block (a table or figure comes with its captions, a list with its items).
            owners = [r for r in record["docling_refs"] if not _is_owned_caption(name, r)]
            assert len(owners) == 1 or _one_list(name, owners), record


def _is_owned_caption(name: str, ref: str) -> bool:
    item = _item(name, ref)
    return item.label == DocItemLabel.CAPTION and item.parent.cref.startswith(
        ("#/tables/", "#/pictures/")
    )


def _one_list(name: str, refs: list[str]) -> bool:
    parents = {_item(name, r).parent.cref for r in refs}
    return len(parents) == 1 and parents.pop().startswith("#/groups/")


def _item(name: str, ref: str):
    return next(i for i, _ in exported(name).document.iterate_items() if i.self_ref == ref)


@pytest.mark.parametrize("name", NAMES)
def test_a_small_limit_gives_more_chunks_and_oversize_ones(name: str) -> None:
    small, large = records(name, 16), records(name, 512)
    assert len(small) >= len(large)
    assert not any(r["oversize"] for r in large)


@pytest.mark.parametrize("name", NAMES)
def test_chunks_follow_reading_order(name: str) -> None:
    # Reading order is page order, then block order on the page (`<stem>.json`).
    firsts = [min((r.page, r.block) for r in chunk_refs(rec)) for rec in records(name, 64)]
    assert firsts == sorted(firsts)


@pytest.mark.parametrize("name", NAMES)
def test_heading_paths_are_the_markdown_headings_above(name: str) -> None:
    """The path of each chunk is the stack of headings in force at its first block, and each
    of them is a heading of our Markdown, at its level."""
    md_headings = set(markdown_headings(rendered(name).markdown))
    path_at: dict[BlockRef, list[str]] = {}
    stack: dict[int, str] = {}
    for unit in rendered(name).units:
        if unit.removed or unit.block is None:
            continue
        if unit.kind == Kind.HEADING:
            stack = {level: text for level, text in stack.items() if level < unit.level}
            stack[unit.level] = unit.text
        elif unit.kind in BODY_KINDS:
            for block in [unit.block, *unit.item_blocks]:
                path_at.setdefault(BlockRef(unit.page, block), [stack[k] for k in sorted(stack)])
    for record in records(name, 64):
        first = chunk_refs(record)[0]
        expected = path_at[first]
        assert [_inline(h) for h in record["headings"]] == [_inline(h) for h in expected]
        for level_text in _levels(expected, stack_levels=_levels_of(name)):
            assert level_text in md_headings


def _inline(text: str) -> str:
    return render_inline(text, dollar=True)


def _levels_of(name: str) -> dict[str, int]:
    return {u.text: u.level for u in rendered(name).units if u.kind == Kind.HEADING}


def _levels(texts: list[str], stack_levels: dict[str, int]) -> list[tuple[int, str]]:
    return [(stack_levels[t], _inline(t)) for t in texts]


def test_boxes_are_in_points_and_on_the_grid() -> None:
    for record in records("synth/report", 64):
        for block in record["blocks"]:
            assert block["unit"] == "pt"
            x1, y1, x2, y2 = block["box"]
            assert 0 <= x1 <= x2 <= 595.01 and 0 <= y1 <= y2 <= 842.01
            assert all(0 <= v <= 1000 for v in block["bbox"])


def test_a_grid_box_is_clamped_to_the_page() -> None:
    """Each coordinate is min(max(v, 0), 1000) before scaling, edge values included."""
    page = Frame(595.0, 842.0, True, 72)
    values = [-5, -0.0, 0, 0.0, 0.5, 999, 1000, 1000.0, 1000.5, 1e9, -1e9, float("inf")]
    for x1, y1, x2, y2 in itertools.product(values, repeat=4):
        clamped = [min(max(v, 0.0), 1000.0) for v in (x1, y1, x2, y2)]
        expected = (clamped[0] * 0.595, clamped[1] * 0.842, clamped[2] * 0.595, clamped[3] * 0.842)
        assert page.box([x1, y1, x2, y2]) == expected
    assert all(math.isnan(v) for v in page.box([float("nan")] * 4))


def test_a_local_hugging_face_tokenizer_counts_the_tokens() -> None:
    folder = str(REPO / "tests" / "fixtures" / "tiny-hpd")
    count = token_counter(load_tokenizer(folder, 64))
    assert count("Group data less time method each.") > 3
    chunks = records("synth/report", 64, folder)
    assert chunks and all(r["tokens"] <= 64 or r["oversize"] for r in chunks)


def test_a_tokenizer_that_cannot_load_is_a_one_line_error(tmp_path: Path) -> None:
    with pytest.raises(TokenizerError) as info:
        load_tokenizer(str(tmp_path), 64)
    message = str(info.value)
    assert "\n" not in message and str(tmp_path) in message


@pytest.mark.parametrize("limit", [16, 512])
@pytest.mark.parametrize("name", NAMES)
def test_chunks_alone_are_the_chunks_written_with_the_docling_file(name: str, limit: int) -> None:
    # without --docling the document is built without provenance (the chunks do not read it)
    alone = build_exports(rendered(name), RenderOptions(chunks=True, chunk_tokens=limit))
    both = RenderOptions(docling=True, chunks=True, chunk_tokens=limit)
    assert alone.docling is None
    assert alone.chunks == build_exports(rendered(name), both).chunks
    # HybridChunker reads no provenance either
    bare = to_docling(rendered(name), provenance=False)
    hybrid = records_of(bare, hybrid_chunks(bare.document, limit), limit)
    assert hybrid == records(name, limit)


def test_chunks_with_the_default_tokenizer_import_neither_transformers_nor_torch() -> None:
    # docling-core's chunker package imports both (about 6 CPU-seconds a run); our chunker and
    # the default tokenizer need neither.
    code = (
        "import sys\n"
        "from hpdparse.export.files import build_exports, check_export_options\n"
        "from hpdparse.markdown.render import RenderOptions\n"
        "from tests.export.export_cases import rendered\n"
        "options = RenderOptions(docling=True, chunks=True, chunk_tokens=64)\n"
        "check_export_options(options)\n"
        "exports = build_exports(rendered('synth/report'), options)\n"
        "assert exports.docling and exports.chunks.count(b'\\n') > 3\n"
        "print(sorted({'transformers', 'torch'} & set(sys.modules)))\n"
    )
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, env=env, timeout=300
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.strip() == "[]"
