"""Our chunker against its oracle, docling-core's HybridChunker (as `make_chunker` configures it):
identical chunks (text, items, headings) and identical `<stem>.chunks.jsonl` records, on every
golden case at limits from 1 token up, and on adversarial documents built with docling-core's
API (lists of every marker kind, tables with spans, stacked headers, pipes, numbers and several
or empty captions, figures, formulas, code, line breaks, deep headings, items larger than the
limit). The real `convert` outputs
(samples and shared-corpus files) are compared in test_export_commands."""

from __future__ import annotations

import pytest

pytest.importorskip("docling_core")

from docling_core.types.doc import (
    BoundingBox,
    DocItemLabel,
    DoclingDocument,
    ProvenanceItem,
    TableCell,
    TableData,
)

from hpdparse.export.chunker import FastChunker
from hpdparse.export.chunks import chunk_records, records_of
from hpdparse.export.docling_chunker import make_chunker
from hpdparse.export.tokenizers import _tekken, _tekken_count, load_tokenizer, token_counter
from tests.export.export_cases import CASES, exported, hybrid_chunks
from tests.helpers.paths import REPO

NAMES = sorted(CASES)
LIMITS = [1, 8, 24, 64, 128, 512]


def chunk_triples(chunks) -> list[tuple[str, list[str], list[str] | None]]:
    return [(c.text, [i.self_ref for i in c.items], c.headings) for c in chunks]


def oracle_triples(doc: DoclingDocument, limit: int, tokenizer: str | None = None):
    return [
        (c.text, [i.self_ref for i in c.meta.doc_items], c.meta.headings)
        for c in make_chunker(limit, tokenizer).chunk(doc)
    ]


def assert_same_chunks(doc: DoclingDocument, limit: int, tokenizer: str | None = None) -> None:
    """Ours (which must apply) and HybridChunker give the same chunks."""
    count = token_counter(load_tokenizer(tokenizer, limit))
    chunks = FastChunker(count, limit).chunk(doc)
    assert chunk_triples(chunks) == oracle_triples(doc, limit, tokenizer)
    # the count the chunker keeps (chunks.jsonl's `tokens`) is that of the whole text
    assert [c.tokens for c in chunks] == [count(c.contextualized()) for c in chunks]


@pytest.mark.parametrize("limit", LIMITS)
@pytest.mark.parametrize("name", NAMES)
def test_golden_cases_chunk_as_hybrid_chunker_does(name: str, limit: int) -> None:
    export = exported(name)
    assert_same_chunks(export.document, limit)
    ours = chunk_records(export, limit)
    assert ours == records_of(export, hybrid_chunks(export.document, limit), limit)
    assert ours, name


def test_a_hugging_face_tokenizer_chunks_as_hybrid_chunker_does() -> None:
    folder = str(REPO / "tests" / "fixtures" / "tiny-hpd")
    for limit in (16, 64):
        assert_same_chunks(exported("synth/report").document, limit, folder)


def test_tekken_counts_as_mistral_common_encodes() -> None:
    for text in ["", "Hello wörld", "<s>[INST] x [/INST]</s>", "$$\\frac{a}{b}$$ 😀 \t\n | - |"]:
        assert _tekken_count(text) == len(_tekken().encode(text, bos=False, eos=False))


# --- adversarial documents ---------------------------------------------------------------------


def _prov(page: int = 1, top: float = 700.0) -> ProvenanceItem:
    box = BoundingBox(l=50, t=top, r=500, b=top - 40, coord_origin="BOTTOMLEFT")
    return ProvenanceItem(page_no=page, bbox=box, charspan=(0, 1))


def _table(doc: DoclingDocument, rows: list[list[str]], header_rows: int = 1, spans=()):
    cells = []
    covered = {
        (r, c) for r0, c0, rs, cs in spans for r in range(r0, r0 + rs) for c in range(c0, c0 + cs)
    }
    span_at = {(r0, c0): (rs, cs) for r0, c0, rs, cs in spans}
    for r, row in enumerate(rows):
        for c, text in enumerate(row):
            if (r, c) in covered and (r, c) not in span_at:
                continue
            rs, cs = span_at.get((r, c), (1, 1))
            cells.append(
                TableCell(
                    text=text, row_span=rs, col_span=cs, start_row_offset_idx=r,
                    end_row_offset_idx=r + rs, start_col_offset_idx=c, end_col_offset_idx=c + cs,
                    column_header=r < header_rows,
                )
            )  # fmt: skip
    data = TableData(table_cells=cells, num_rows=len(rows), num_cols=max(map(len, rows)))
    return doc.add_table(data=data, prov=_prov())


def _caption(doc: DoclingDocument, owner, text: str) -> None:
    caption = doc.add_text(label=DocItemLabel.CAPTION, text=text, prov=_prov(), parent=owner)
    owner.captions.append(caption.get_ref())


def adversarial() -> DoclingDocument:
    doc = DoclingDocument(name="adversarial")
    doc.add_page(page_no=1, size={"width": 595, "height": 842})
    doc.add_text(label=DocItemLabel.PAGE_HEADER, text="Running head", content_layer="furniture")
    doc.add_text(label=DocItemLabel.TEXT, text="Before any heading.", prov=_prov())
    doc.add_title(text="The title", prov=_prov())
    doc.add_text(label=DocItemLabel.TEXT, text="Line one\nline two\n\nnew paragraph", prov=_prov())
    doc.add_heading(text="Deep", level=3, prov=_prov())
    doc.add_text(label=DocItemLabel.FOOTNOTE, text="1 A footnote.", prov=_prov())
    doc.add_heading(text="Lists", level=1, prov=_prov())
    for enumerated, markers in [
        (False, ["-", "•", "", "*"]),
        (True, ["1.", "2.", "3)", "(c)"]),
        (True, ["", "", "iv.", "+"]),
        (False, ["a)", "b)", "", "1."]),
    ]:
        group = doc.add_list_group()
        for i, marker in enumerate(markers):
            text = f"item {i} with some words to count\nand a second line"
            doc.add_list_item(
                text=text, enumerated=enumerated, marker=marker, parent=group, prov=_prov()
            )
    doc.add_list_group()  # empty
    doc.add_heading(text="Tables", level=1, prov=_prov())
    t1 = _table(doc, [["Name", "Value", "Unit"], ["a|b", "1.50", "kg"], ["c\nd", "2", ""]])
    _caption(doc, t1, "Table 1: with a pipe | in it.")
    _caption(doc, t1, "Continued caption.")
    t2 = _table(
        doc,
        [["Group", "2019", "2019"], ["", "Q1", "Q2"], ["A", "1,000", "-3.5e2"], ["B", "x", "7"]],
        header_rows=2,
        spans=[(0, 1, 1, 2)],
    )
    _caption(doc, t2, "")
    _table(doc, [["only", "header"]])
    _table(doc, [["no", "flags"], ["1", "2"]], header_rows=0)
    doc.add_heading(text="Math and code", level=2, prov=_prov())
    doc.add_formula(text="E = mc^2 \\tag{1}", prov=_prov())
    doc.add_formula(text="", prov=_prov())
    doc.add_code(text="x = 1\n```\ny = 2", prov=_prov())
    doc.add_heading(text="Figures", level=1, prov=_prov())
    picture = doc.add_picture(prov=_prov())
    _caption(doc, picture, "Figure 1: a caption of a figure.")
    doc.add_picture(prov=_prov())  # no caption: no text, no chunk
    doc.add_text(label=DocItemLabel.CAPTION, text="An orphan caption.", prov=_prov())
    doc.add_text(label=DocItemLabel.REFERENCE, text="[1] A. Author. Title. 2020.", prov=_prov())
    long_text = " ".join(f"word{i} and more" for i in range(300))
    doc.add_text(label=DocItemLabel.TEXT, text=long_text, prov=_prov(2))
    doc.add_heading(text="Back up", level=1, prov=_prov(2))
    for i in range(12):
        doc.add_text(label=DocItemLabel.TEXT, text=f"Short paragraph {i}.", prov=_prov(2))
    return doc


@pytest.mark.parametrize("limit", [1, 4, 12, 30, 64, 200, 4096])
def test_adversarial_document_chunks_as_hybrid_chunker_does(limit: int) -> None:
    assert_same_chunks(adversarial(), limit)
