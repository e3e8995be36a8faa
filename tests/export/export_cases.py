"""Rendered documents for the export tests: the golden raw-page cases of tests/markdown (own cases
and the synthetic samples), rendered as `convert` renders them."""

from __future__ import annotations

import functools
import re
from pathlib import Path

from docling_core.types.doc import DoclingDocument

from hpdparse.export.chunker import Chunk
from hpdparse.export.docling import DoclingExport, to_docling
from hpdparse.markdown.render import RenderedDocument, render_document
from tests.helpers.golden_cases import load_own, load_synth, own_cases, synth_cases

CASES: dict[str, Path] = {f"own/{p.name}": p for p in own_cases()} | {
    f"synth/{p.name}": p for p in synth_cases()
}


@functools.cache
def rendered(name: str) -> RenderedDocument:
    path = CASES[name]
    doc, options = load_synth(path) if name.startswith("synth/") else load_own(path)
    return render_document(doc, options)


@functools.cache
def exported(name: str) -> DoclingExport:
    return to_docling(rendered(name))


def hybrid_chunks(
    document: DoclingDocument, limit: int, tokenizer: str | None = None
) -> list[Chunk]:
    """docling-core's HybridChunker's chunks of `document` (as `make_chunker` configures it), as
    our chunker's `Chunk`s, each counted whole (ours counts by parts): the oracle of ours."""
    from hpdparse.export.docling_chunker import make_chunker  # imports transformers and torch

    chunker = make_chunker(limit, tokenizer)
    chunks = [Chunk(c.text, c.meta.doc_items, c.meta.headings) for c in chunker.chunk(document)]
    for chunk in chunks:
        chunk.tokens = chunker.tokenizer.count_tokens(chunk.contextualized())
    return chunks


_MARKDOWN_HEADING = re.compile(r"^(#{1,6}) (.*)$", re.M)


def markdown_headings(markdown: str) -> list[tuple[int, str]]:
    """(level, text) of every ATX heading in our Markdown, `#` being level 0."""
    return [(len(m.group(1)) - 1, m.group(2).strip()) for m in _MARKDOWN_HEADING.finditer(markdown)]
