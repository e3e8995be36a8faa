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
from docling_core.transforms.serializer.base import BaseDocSerializer
from docling_core.transforms.serializer.markdown import MarkdownTableSerializer
from docling_core.types.doc import DoclingDocument
from pydantic import ConfigDict

from hpdparse.export.tokenizers import ChunkTokenizer, _tekken, _tekken_count, load_tokenizer


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


def docling_tokenizer(tokenizer: ChunkTokenizer) -> BaseTokenizer:
    """docling-core's tokenizer interface over `tokenizer` (for its HybridChunker)."""
    if tokenizer.hugging_face is not None:
        return tokenizer.hugging_face
    return TekkenTokenizer(tekken=_tekken(), max_tokens=tokenizer.max_tokens)


class _MarkdownTables(ChunkingSerializerProvider):
    """Chunk text as Markdown, tables included (docling's default writes tables as triplets)."""

    def get_serializer(self, doc: DoclingDocument) -> BaseDocSerializer:
        return ChunkingDocSerializer(doc=doc, table_serializer=MarkdownTableSerializer())


class _WholeBlocks(HybridChunker):
    def _split_using_plain_text(
        self, doc_chunk: DocChunk, doc_serializer: BaseDocSerializer
    ) -> list[DocChunk]:
        # Called once a chunk holds a single item: never cut it.
        return [doc_chunk]


def make_chunker(max_tokens: int, tokenizer: str | None) -> HybridChunker:
    return _WholeBlocks(
        tokenizer=docling_tokenizer(load_tokenizer(tokenizer, max_tokens)),
        serializer_provider=_MarkdownTables(),
        delim="\n\n",  # blocks stay Markdown blocks (a table after a paragraph needs it)
    )
