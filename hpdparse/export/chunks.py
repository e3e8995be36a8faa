"""Chunks for retrieval, written as `<stem>.chunks.jsonl`: the chunks docling-core's HybridChunker
makes of the exported DoclingDocument (`docling_chunker.py` says how it is configured), made by
our equivalent chunker (`chunker.py`), with each chunk's provenance mapped back to our blocks.
The chunker writes the subset of the DoclingDocument model `docling.py` builds: the documents it is
given here, no other (tests/export/test_chunker.py compares the two chunkers)."""

from __future__ import annotations

import json
from typing import TypedDict

from docling_core.types.doc import DocItem, DocItemLabel

from hpdparse.export.chunker import Chunk, FastChunker
from hpdparse.export.docling import DoclingExport
from hpdparse.export.pages import Frame
from hpdparse.export.tokenizers import joined_counter, load_tokenizer, token_counter
from hpdparse.hpd.stream import Block, BlockRef


class ChunkBlock(TypedDict):
    """A block a chunk's text comes from, where it is on its page."""

    page: int
    block: int
    bbox: list[int] | None  # 0-1000 grid
    box: list[float] | None  # in `unit`s, origin top left
    unit: str | None  # "pt" or "px"
    confidence: float | None  # null in a run without log-probabilities


class ChunkRecord(TypedDict):
    """A line of `<stem>.chunks.jsonl`."""

    id: str
    text: str
    headings: list[str]
    tokens: int
    oversize: bool
    pages: list[int]
    blocks: list[ChunkBlock]
    docling_refs: list[str]


def chunk_records(
    export: DoclingExport, max_tokens: int, tokenizer: str | None = None
) -> list[ChunkRecord]:
    """The chunks of one document, as the JSON objects of `<stem>.chunks.jsonl`: made by our
    chunker (`chunker.py`), identical to docling-core's HybridChunker and much faster."""
    counter = load_tokenizer(tokenizer, max_tokens)
    chunker = FastChunker(token_counter(counter), max_tokens, joined_counter(counter))
    return records_of(export, chunker.chunk(export.document), max_tokens)


def records_of(export: DoclingExport, chunks: list[Chunk], max_tokens: int) -> list[ChunkRecord]:
    """The records of `chunks`, each counted (`Chunk.tokens`), with their blocks."""
    stem, pages, blocks = export.document.name, export.pages, export.blocks
    records: list[ChunkRecord] = []
    for index, chunk in enumerate(chunks):
        items = _owned_items(chunk.items)
        # each block once, in order
        refs = list(dict.fromkeys(r for ref in items for r in export.refs.get(ref, ())))
        tokens = chunk.tokens or 0
        records.append(
            {
                "id": f"{stem}:{index}",
                "text": chunk.text.strip(),
                "headings": chunk.headings or [],
                "tokens": tokens,
                "oversize": tokens > max_tokens,
                "pages": sorted({ref.page for ref in refs}),
                "blocks": [_block_entry(ref, blocks, pages) for ref in refs],
                "docling_refs": items,
            }
        )
    return records


def _block_entry(
    ref: BlockRef, blocks: dict[BlockRef, Block], pages: dict[int, Frame]
) -> ChunkBlock:
    block = blocks.get(ref)
    grid = list(block.bbox) if block is not None and block.bbox else None
    page = pages.get(ref.page)
    box = page.box(grid) if grid and page is not None else None
    return {
        "page": ref.page,
        "block": ref.block,
        "bbox": grid,
        "box": [round(v, 2) for v in box] if box else None,
        "unit": None if page is None else ("pt" if page.in_points else "px"),
        "confidence": block.confidence if block is not None else None,
    }


def _owned_items(doc_items: list[DocItem]) -> list[str]:
    """The items a chunk's text comes from. A table brings its captions (HybridChunker may list
    one alone, with no text, in the chunk before its table: not that chunk's); a picture, which
    has no text of its own, comes with its caption."""
    owned: list[str] = []
    for item in doc_items:
        parent = item.parent.cref if item.parent is not None else ""
        if item.label == DocItemLabel.CAPTION:
            if parent.startswith("#/tables/"):
                continue
            if parent.startswith("#/pictures/") and parent not in owned:
                owned.append(parent)
        owned.append(item.self_ref)
        if item.label == DocItemLabel.TABLE:
            owned.extend(caption.cref for caption in getattr(item, "captions", []))
    return owned


def chunks_jsonl(records: list[ChunkRecord]) -> str:
    return "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records)
