"""Our chunker: the chunks docling-core's HybridChunker makes of our DoclingDocument (as
`make_chunker` configures it), made about ten times faster.

HybridChunker spends most of its time in docling-core's generic machinery: a Markdown serializer
that copies and validates its parameters at every call, rebuilds each table's grid each time it
is asked, and walks the whole tree to find excluded items; pydantic chunk objects built and
dumped for every candidate window. Our documents use a small part of the model (no formatting,
links, metadata, inline groups, nested lists or rich table cells), so here the Markdown of each
item is written directly, as docling-core writes it for those items, and the same algorithm
(structure first, then windows of items, then neighbours merged up to the limit, counted with
the same tokenizer on the same strings) runs on plain objects. That subset is what
`docling.py` builds (the only documents given to it); tests/export/test_chunker.py checks, on
every test document and adversarial cases, that both give identical chunks."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from itertools import groupby

from docling_core.transforms.serializer.markdown import _flatten_header_rows
from docling_core.types.doc import (
    CodeItem,
    ContentLayer,
    DocItem,
    DoclingDocument,
    FormulaItem,
    ListGroup,
    ListItem,
    NodeItem,
    PictureItem,
    SectionHeaderItem,
    TableItem,
    TitleItem,
)
from tabulate import _column_type, tabulate

from hpdparse.markdown.text import code_fence

DELIM = "\n\n"  # make_chunker's delimiter: blocks stay Markdown blocks
_NUMBERED = re.compile(r"\d+\.")


@dataclass
class Chunk:
    text: str
    items: list[DocItem]
    headings: list[str] | None
    parts: list[str] | None = None  # the texts `text` joins with DELIM, when known
    tokens: int = 0  # of `contextualized()`, counted by the chunker that returns it

    def contextualized(self) -> str:
        """What HybridChunker counts and an embedder sees: headings, then the text."""
        return DELIM.join(self.contextualized_parts())

    def contextualized_parts(self) -> list[str]:
        """The texts `contextualized` joins with DELIM."""
        return [*(self.headings or []), *self.text_parts()]

    def text_parts(self) -> list[str]:
        return self.parts or [self.text]


class FastChunker:
    """HybridChunker(merge_peers=True, delim="\\n\\n", Markdown tables, blocks never cut)."""

    def __init__(
        self,
        count_tokens: Callable[[str], int],
        max_tokens: int,
        count_joined: Callable[[list[str]], int] | None = None,
    ) -> None:
        """`count_joined(parts)`: count_tokens(DELIM.join(parts)), computed faster where the
        tokenizer allows it (`tekken_joins`)."""
        self.count = count_tokens
        self.max_tokens = max_tokens
        self.count_joined = count_joined or (lambda parts: count_tokens(DELIM.join(parts)))

    def chunk(self, doc: DoclingDocument) -> list[Chunk]:
        chunks = [
            window
            for chunk, texts in _structural_chunks(doc)
            for window in self._split_by_items(chunk, texts)
        ]
        # peers: neighbours under the same headings (HybridChunker never merges across them)
        peers = (list(group) for _, group in groupby(chunks, key=lambda c: c.headings))
        return [merged for group in peers for merged in self._merge_peers(group)]

    def _tokens(self, chunk: Chunk) -> int:
        return self.count_joined(chunk.contextualized_parts())

    def _split_by_items(self, chunk: Chunk, texts: list[str]) -> list[Chunk]:
        """HybridChunker._split_by_doc_items: windows of the items of a chunk of several (a list,
        a table and its captions), each the largest that fits; `texts`: the items' own."""
        items = chunk.items
        if len(items) <= 1:
            return [chunk]

        def window(start: int, end: int) -> Chunk:
            parts = [t for t in texts[start : end + 1] if t]
            return Chunk(DELIM.join(parts), items[start : end + 1], chunk.headings, parts)

        counts = [self.count(text) for text in texts]
        overhead = self._tokens(window(0, 0)) - counts[0]
        spans = self._windows(
            counts, lambda _: overhead, lambda s, e: self._tokens(window(s, e)), check_first=True
        )
        return [window(start, end) for start, end in spans]

    def _merge_peers(self, chunks: list[Chunk]) -> list[Chunk]:
        """HybridChunker._merge_chunks_with_matching_metadata: neighbours under the same headings
        (all of `chunks`) joined while the result fits."""

        def merged(start: int, end: int) -> Chunk:
            window = chunks[start : end + 1]
            parts = [part for c in window for part in c.text_parts()]
            items = [item for c in window for item in c.items]
            return Chunk(DELIM.join(parts), items, chunks[start].headings, parts)

        counts = [self.count_joined(c.text_parts()) for c in chunks]
        spans = self._windows(
            counts,
            lambda start: self._tokens(chunks[start]) - counts[start],
            lambda s, e: self._tokens(merged(s, e)),
            check_first=False,
        )
        result = [merged(start, end) for start, end in spans]
        for chunk in result:
            chunk.tokens = self._tokens(chunk)
        return result

    def _windows(
        self,
        counts: list[int],
        overhead: Callable[[int], int],
        tokens: Callable[[int, int], int],
        check_first: bool,
    ) -> Iterator[tuple[int, int]]:
        """HybridChunker's windows, as both its loops find them: from each start, the largest
        window (first and last index) that fits, grown on a running estimate (the `counts` of
        its pieces and of the delimiters between them, plus the `overhead` of the headings
        around them), re-anchored on the exact count (`tokens`) where the estimate goes over the
        limit, then shrunk back while the exact count is over. A window holds its first piece
        whether it fits or not; `check_first`: it stops there when that one does not fit."""
        delim = self.count(f"a{DELIM}b") - self.count("a") - self.count("b")
        start = 0
        while start < len(counts):
            end, running, extra = start, 0, overhead(start)
            while end < len(counts):
                running += counts[end] + (delim if end > start else 0)
                if running + extra > self.max_tokens and (check_first or end > start):
                    exact = tokens(start, end)
                    if exact > self.max_tokens:
                        break
                    running = exact - extra  # the estimate overshot: re-anchored
                end += 1
            last = max(end - 1, start)
            while last > start and tokens(start, last) > self.max_tokens:
                last -= 1
            yield start, last
            start = last + 1


def _structural_chunks(doc: DoclingDocument) -> Iterator[tuple[Chunk, list[str]]]:
    """HierarchicalChunker: one chunk per top-level item of the body (a list whole, a table or
    figure with its captions) with the headings in force above it; with its items' own texts."""
    markdown = _Markdown(doc)
    headings: dict[int, str] = {}
    path: list[str] | None = None  # the headings in force, in level order (shared, never changed)
    for ref in doc.body.children:  # the children of lists, tables and figures come with them
        node = _resolve(doc, ref.cref)
        if node.content_layer != ContentLayer.BODY:
            continue
        if isinstance(node, (TitleItem, SectionHeaderItem)):
            level = node.level if isinstance(node, SectionHeaderItem) else 0
            headings = {k: v for k, v in headings.items() if k < level}
            headings[level] = node.text
            path = [headings[k] for k in sorted(headings)]
            continue
        text, items, texts = markdown.top_level(node)
        if text and items:
            yield Chunk(text, items, path), texts


class _Markdown:
    """The Markdown docling-core's chunking serializer (ChunkingDocSerializer with
    MarkdownTableSerializer) writes for our items."""

    def __init__(self, doc: DoclingDocument) -> None:
        self.doc = doc
        # docling leaves a caption to the item it captions (its own text serializes to nothing)
        floating = [*doc.tables, *doc.pictures, *(t for t in doc.texts if isinstance(t, CodeItem))]
        self._captions = {ref.cref for item in floating for ref in item.captions}

    def top_level(self, node: NodeItem) -> tuple[str, list[DocItem], list[str]]:
        """A top-level node's text, the items it comes from (the spans of docling's result) and
        their own texts (each item serialized alone, what HybridChunker's windows join)."""
        if isinstance(node, ListGroup):
            items = [_resolve(self.doc, ref.cref) for ref in node.children]
            texts = [self._list_item(item, node) for item in items]
            return "\n".join(texts), items, texts
        if isinstance(node, (TableItem, PictureItem)):
            return self._floating(node)
        text = "" if node.self_ref in self._captions else _text(node)
        return text, [node] if text else [], [text]

    def _list_item(self, item: ListItem, group: ListGroup) -> str:
        marker = item.marker
        case_auto = any(char.isalnum() for char in marker)
        already_valid = marker in ("-", "*", "+") or _NUMBERED.fullmatch(marker) is not None
        pieces = []
        if not already_valid:
            md_marker = "-"
            first = _resolve(self.doc, group.children[0].cref)
            if not marker and isinstance(first, ListItem) and first.enumerated:
                refs = [ref.cref for ref in group.children]
                md_marker = f"{refs.index(item.self_ref) + 1}."
            pieces.append(md_marker)
        if marker and (case_auto or already_valid):
            pieces.append(marker)
        pieces.append(_line_breaks(item.text))
        return " ".join(pieces)

    def _floating(self, item: TableItem | PictureItem) -> tuple[str, list[DocItem], list[str]]:
        """Captions first (docling's standard placement), then the table; a picture's image is
        an empty placeholder. Spans: the captions, when they have text, then the table; their
        own texts: the table's is the whole text (a caption alone serializes to nothing)."""
        captions = [_resolve(self.doc, ref.cref) for ref in item.captions]
        captions = [c for c in captions if c.content_layer == ContentLayer.BODY]
        caption_text = " ".join(c.text for c in captions)
        table = _pipe_table(item) if isinstance(item, TableItem) else ""
        text = "\n\n".join(part for part in (caption_text, table) if part)
        items = [*(captions if caption_text else []), *([item] if table else [])]
        return text, items, ["" if i is not item else text for i in items]


def _text(item: DocItem) -> str:
    if isinstance(item, CodeItem):
        return code_fence(item.text)
    if isinstance(item, FormulaItem):
        if item.text:
            return f"$${item.text}$$"
        return "<!-- formula-not-decoded -->" if item.orig else ""
    return _line_breaks(item.text)


def _pipe_table(item: TableItem) -> str:
    """MarkdownTableSerializer's pipe table (tabulate's `github` format), from the table's grid
    built once (docling's serializer builds it twice)."""
    grid = item.data.grid
    # newlines and pipes escaped so that the pipe table stays valid
    rows = [[(c.text or "").replace("\n", " ").replace("|", "&#124;") for c in r] for r in grid]
    if not rows:
        return ""
    headers = item.data._count_column_header_rows(grid=grid)
    if headers == 0 and not any(c.column_header for row in grid[1:] for c in row):
        headers = 1  # no header flags: the first row is the header
    body = rows[headers:]
    numeric = [_column_type(list(column)) in (int, float) for column in zip(*body, strict=True)]
    return tabulate(
        body,
        headers=_flatten_header_rows(rows[:headers], len(rows[0])),
        tablefmt="github",
        disable_numparse=True,
        colalign=tuple("right" if n else "left" for n in numeric) if numeric else None,
    )


def _resolve(doc: DoclingDocument, cref: str) -> NodeItem:
    """RefItem.resolve for the references our documents hold (`#/texts/7`), without its regex."""
    _, collection, index = cref.split("/")
    return getattr(doc, collection)[int(index)]


def _line_breaks(text: str) -> str:
    """docling's GFM hard line breaks: a single newline becomes two spaces and a newline."""
    return "\n\n".join(part.replace("\n", "  \n") for part in text.split("\n\n"))
