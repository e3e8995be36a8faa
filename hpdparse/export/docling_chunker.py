"""docling-core's HybridChunker as `--chunks` uses it: the oracle our chunker (`chunker.py`) is
tested against, and the chunker to give docling's readers (LangChain's DoclingLoader,
docs/retrieval.md) for the chunks of `<stem>.chunks.jsonl`.

HybridChunker follows the structure (never across a heading, a table whole with its captions, a
figure with its caption, peers merged up to the token limit) and splits a section at block
boundaries. What it would do beyond that, cutting one block's text in the middle, is turned off
(`_WholeBlocks`): a block larger than the limit becomes a chunk of its own, over the limit and
marked `oversize`, so that every block is in exactly one chunk and a citation is never half a
paragraph.

Importing this module imports docling-core's chunker package, and with it transformers and torch
(about 6 CPU-seconds): nothing in a conversion imports it."""

from __future__ import annotations

from typing import Any

from docling_core.transforms.chunker import DocChunk, HybridChunker
from docling_core.transforms.chunker.hierarchical_chunker import (
    ChunkingDocSerializer,
    ChunkingSerializerProvider,
)
from docling_core.transforms.chunker.tokenizer.base import BaseTokenizer
from docling_core.transforms.serializer.base import BaseDocSerializer, SerializationResult
from docling_core.transforms.serializer.markdown import MarkdownTableSerializer
from docling_core.types.doc import DoclingDocument, NodeItem
from pydantic import ConfigDict, PrivateAttr

from hpdparse.export.tokenizers import _tekken, _tekken_count, load_tokenizer


class TekkenTokenizer(BaseTokenizer):
    """docling-core's tokenizer interface over mistral-common's bundled Tekken tokenizer."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    tekken: Any
    max_tokens: int

    def count_tokens(self, text: str) -> int:
        return _tekken_count(text)

    def get_max_tokens(self) -> int:
        return self.max_tokens

    def get_tokenizer(self) -> Any:
        return self.tekken


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
    hugging_face = load_tokenizer(tokenizer, max_tokens).hugging_face
    return _WholeBlocks(
        tokenizer=hugging_face or TekkenTokenizer(tekken=_tekken(), max_tokens=max_tokens),
        serializer_provider=_MarkdownTables(),
        delim="\n\n",  # blocks stay Markdown blocks (a table after a paragraph needs it)
    )
