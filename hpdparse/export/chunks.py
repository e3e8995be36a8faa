"""Chunks for retrieval, written as `<stem>.chunks.jsonl`: docling-core's HybridChunker over the
exported DoclingDocument, with each chunk's provenance mapped back to our blocks.

HybridChunker follows the structure (never across a heading, a table whole with its captions, a
figure with its caption, peers merged up to the token limit) and splits a section at block
boundaries. What it would do beyond that, cutting one block's text in the middle, is turned off
(`_WholeBlocks`): a block larger than the limit becomes a chunk of its own, over the limit and
marked `oversize`, so that every block is in exactly one chunk and a citation is never half a
paragraph."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from docling_core.transforms.chunker import DocChunk, HybridChunker
from docling_core.transforms.chunker.hierarchical_chunker import (
    ChunkingDocSerializer,
    ChunkingSerializerProvider,
)
from docling_core.transforms.serializer.base import BaseDocSerializer, SerializationResult
from docling_core.transforms.serializer.markdown import MarkdownTableSerializer
from docling_core.types.doc import DocItem, DocItemLabel, DoclingDocument, NodeItem
from pydantic import PrivateAttr

from hpdparse.export.chunker import Chunk, FastChunker, Unsupported
from hpdparse.export.docling import DoclingExport
from hpdparse.export.pages import BlockRef, PageGeometry, blocks_by_ref, page_geometries
from hpdparse.export.tokenizers import joined_counter, load_tokenizer, token_counter

# The serializer parameters that decide which items are excluded (CommonParams).
_EXCLUSION_PARAMS = ("labels", "layers", "pages", "start_idx", "stop_idx")


class _Serializer(ChunkingDocSerializer):
    """docling's chunking serializer, with its excluded-item set looked up by the parameters it
    depends on: docling-core re-derives the cache key (a copy and JSON dump of every parameter)
    at each of the thousands of calls per document, most of the chunker's time."""

    _excluded_by_params: dict[tuple[Any, ...], set[str]] = PrivateAttr(default_factory=dict)
    _top_level: dict[str, SerializationResult] = PrivateAttr(default_factory=dict)

    def get_excluded_refs(self, **kwargs: Any) -> set[str]:
        key = tuple(_frozen(kwargs.get(n, getattr(self.params, n))) for n in _EXCLUSION_PARAMS)
        cache = self._excluded_by_params
        if key not in cache:
            cache[key] = super().get_excluded_refs(**kwargs)
        return cache[key]

    def serialize(self, *, item: NodeItem | None = None, **kwargs: Any) -> SerializationResult:
        # HierarchicalChunker serializes each top-level item (item and visited only); then
        # HybridChunker serializes again, afresh (item only), the items of a chunk of several,
        # a table among them: the second time is the first one's result.
        cache = self._top_level
        if item is not None and not kwargs and item.self_ref in cache:
            return cache[item.self_ref]
        result = super().serialize(item=item, **kwargs)
        if item is not None and kwargs.keys() == {"visited"}:
            cache[item.self_ref] = result
        return result


def _frozen(value: Any) -> Any:
    return frozenset(value) if isinstance(value, set | list | tuple) else value


class _MarkdownTables(ChunkingSerializerProvider):
    """Chunk text as Markdown, tables included (docling's default writes tables as triplets).
    HybridChunker and its inner HierarchicalChunker each ask for a serializer: one per document
    (the last one asked for) spares building its item index twice."""

    def __init__(self) -> None:
        self._last: _Serializer | None = None

    def get_serializer(self, doc: DoclingDocument) -> BaseDocSerializer:
        if self._last is None or self._last.doc is not doc:
            self._last = _Serializer(doc=doc, table_serializer=MarkdownTableSerializer())
        return self._last


class _WholeBlocks(HybridChunker):
    def _split_using_plain_text(
        self, doc_chunk: DocChunk, doc_serializer: BaseDocSerializer
    ) -> list[DocChunk]:
        # Called once a chunk holds a single item: never cut it.
        return [doc_chunk]


def make_chunker(max_tokens: int, tokenizer: str | None) -> HybridChunker:
    return _WholeBlocks(
        tokenizer=load_tokenizer(tokenizer, max_tokens),
        serializer_provider=_MarkdownTables(),
        delim="\n\n",  # blocks stay Markdown blocks (a table after a paragraph needs it)
    )


def chunk_records(
    export: DoclingExport,
    document_json: dict[str, Any],
    max_tokens: int,
    tokenizer: str | None = None,
    *,
    docling_chunker: bool = False,
) -> list[dict[str, Any]]:
    """The chunks of one document, as the JSON objects of `<stem>.chunks.jsonl`. Made by our
    chunker (`chunker.py`), identical to docling-core's HybridChunker and much faster; by
    HybridChunker itself with `docling_chunker` or where ours does not apply."""
    counter = load_tokenizer(tokenizer, max_tokens)
    count, count_joined = token_counter(counter), joined_counter(counter)
    chunks = None if docling_chunker else _fast_chunks(export, count, count_joined, max_tokens)
    fast = chunks is not None
    if chunks is None:
        chunks = [
            Chunk(c.text, c.meta.doc_items, c.meta.headings)
            for c in make_chunker(max_tokens, tokenizer).chunk(export.document)
            if isinstance(c, DocChunk)
        ]
    stem = document_json["stem"]
    pages = page_geometries(document_json) if export.pages is None else export.pages
    blocks = blocks_by_ref(document_json) if export.blocks is None else export.blocks
    records = []
    for index, chunk in enumerate(chunks):
        items = _owned_items(chunk.items)
        refs: list[BlockRef] = []
        for ref in items:
            refs.extend(r for r in export.refs.get(ref, []) if r not in refs)
        # ours counted by parts, HybridChunker's whole: the tests compare the two
        tokens = (
            count_joined(chunk.contextualized_parts()) if fast else count(chunk.contextualized())
        )
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


def _fast_chunks(
    export: DoclingExport,
    count: Callable[[str], int],
    count_joined: Callable[[list[str]], int],
    max_tokens: int,
) -> list[Chunk] | None:
    try:
        return FastChunker(count, max_tokens, count_joined).chunk(export.document)
    except Unsupported:
        return None  # a part of the model ours does not write: HybridChunker does it


def _block_entry(
    ref: BlockRef, blocks: dict[BlockRef, dict[str, Any]], pages: dict[int, PageGeometry]
) -> dict[str, Any]:
    grid = blocks.get(ref, {}).get("bbox")
    page = pages.get(ref.page)
    box = page.box(grid) if grid and page is not None else None
    return {
        "page": ref.page,
        "block": ref.block,
        "bbox": grid,
        "box": [round(v, 2) for v in box] if box else None,
        "unit": None if page is None else ("pt" if page.in_points else "px"),
        "confidence": None,  # filled once the run records block confidences
    }


def _owned_items(doc_items: list[DocItem]) -> list[str]:
    """The items a chunk's text comes from. A table brings its captions (HybridChunker may list
    one alone, with no text, in the chunk before its table: not that chunk's); a picture, which
    has no text of its own, comes with its caption."""
    owned: list[str] = []
    for item in doc_items:
        parent = item.parent.cref if item.parent is not None else ""
        if item.label == DocItemLabel.CAPTION and parent.startswith("#/tables/"):
            continue
        is_picture_caption = item.label == DocItemLabel.CAPTION and parent.startswith("#/pictures/")
        if is_picture_caption and parent not in owned:
            owned.append(parent)
        owned.append(item.self_ref)
        if item.label == DocItemLabel.TABLE:
            owned.extend(caption.cref for caption in getattr(item, "captions", []))
    return owned


def chunks_jsonl(records: list[dict[str, Any]]) -> str:
    return "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records)
