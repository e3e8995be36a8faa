"""render_document: options, failed and truncated pages, images, merges, security."""

from __future__ import annotations

import json
import re

import pytest

from hpdparse.engines.base import PageResult
from hpdparse.markdown.json_export import SCHEMA_VERSION
from hpdparse.markdown.records import ConvertedWith, DocumentRecord
from hpdparse.markdown.render import RenderOptions, comment, render_document
from hpdparse.sources.document import PageGeometry
from hpdparse.store.raw_pages import RawPage
from tests.helpers.records import page_record


def _doc(*raws: str) -> DocumentRecord:
    pages = [
        page_record(i + 1, raw, width_px=1000, height_px=2000, finish_reason="stop")
        for i, raw in enumerate(raws)
    ]
    return DocumentRecord(source="/in/d.pdf", stem="d", page_count=len(pages), pages=pages)


FIGURE_PAGE = (
    "<BLOCK>image [100, 100, 500, 300]"
    "<BLOCK>image_caption [100, 310, 500, 320]<CHILD>Figure 1: Cats"
    "<BLOCK>chart [600, 100, 900, 300]"
    "<BLOCK>image [0, 0, 0, 0]"
)


def test_json_top_level_keys_and_settings_passthrough() -> None:
    doc = _doc("<BLOCK>text [1, 2, 3, 4]<CHILD>x")
    doc.settings = ConvertedWith(200, "1-3", 3, "document parsing with fork.", 8000)
    data = render_document(doc).json
    for key in (
        "schema_version",
        "source",
        "stem",
        "page_count",
        "engine",
        "model",
        "revision",
        "settings",
        "render_options",
        "pages",
    ):
        assert key in data
    assert data["schema_version"] == SCHEMA_VERSION == 1
    assert data["settings"] == {
        "dpi": 200,
        "pages": "1-3",
        "selected_pages": 3,
        "prompt": "document parsing with fork.",
        "max_tokens": 8000,
    }
    json.dumps(data)  # serialisable


def test_figures_are_cropped_and_linked_with_our_file_names() -> None:
    rendered = render_document(_doc(FIGURE_PAGE))
    assert [(c.filename, c.page_number, c.bbox_px) for c in rendered.images] == [
        ("images/page-0001-figure-01.png", 1, (100, 200, 500, 600)),
        ("images/page-0001-chart-01.png", 1, (600, 200, 900, 600)),
    ]
    assert rendered.markdown == (
        "![](images/page-0001-figure-01.png)\n\nFigure 1: Cats\n\n"
        "![](images/page-0001-chart-01.png)\n"
    )


def test_a_figure_caption_is_written_once() -> None:
    markdown = render_document(_doc(FIGURE_PAGE)).markdown
    assert markdown.count("Figure 1: Cats") == 1


def test_no_images_keeps_captions_only() -> None:
    rendered = render_document(_doc(FIGURE_PAGE), RenderOptions(images=False))
    assert rendered.images == []
    assert rendered.markdown == "Figure 1: Cats\n"
    blocks = rendered.json["pages"][0]["blocks"]
    assert all("image" not in b for b in blocks)


def test_model_text_never_chooses_a_file_name() -> None:
    raw = (
        "<BLOCK>../../etc/passwd [100, 100, 500, 300]<BLOCK>image [1, 1, 50, 50]<CHILD>../../x.png"
    )
    rendered = render_document(_doc(raw))
    assert all(
        re.fullmatch(r"images/page-\d{4}-[a-z]+-\d{2}\.png", c.filename) for c in rendered.images
    )


def test_headers_footers_only_with_keep_headers() -> None:
    raw = (
        "<BLOCK>header [1, 1, 900, 20]<CHILD>Running head"
        "<BLOCK>text [1, 30, 900, 60]<CHILD>Body."
        "<BLOCK>aside_text [1, 30, 20, 900]<CHILD>Side note"
        "<BLOCK>footer [1, 950, 900, 970]<CHILD>Footer"
        "<BLOCK>page_number [450, 980, 550, 990]<CHILD>7"
    )
    assert render_document(_doc(raw)).markdown == "Body.\n"
    kept = render_document(_doc(raw), RenderOptions(keep_headers=True)).markdown
    assert kept == "Running head\n\nBody.\n\nSide note\n\nFooter\n\n7\n"
    blocks = render_document(_doc(raw)).json["pages"][0]["blocks"]
    assert [b["text"] for b in blocks] == ["Running head", "Body.", "Side note", "Footer", "7"]


def test_failed_page_comment_cannot_be_closed() -> None:
    doc = _doc("<BLOCK>text [1, 2, 3, 4]<CHILD>fine", "")
    doc.pages[1] = RawPage.failed(2, "bad --> <script>alert(1)</script>\n--!> end")
    rendered = render_document(doc)
    assert rendered.markdown.endswith(
        "<!-- page 2 failed: bad -› ‹script›alert(1)‹/script› -!› end -->\n"
    )
    assert rendered.markdown.count("-->") == 1
    page = rendered.json["pages"][1]
    assert (page["status"], page["error"], page["blocks"]) == ("failed", doc.pages[1].error, [])


def test_comment_helper() -> None:
    assert comment("a -- b") == "<!-- a - b -->"
    assert comment("x\n\ny") == "<!-- x y -->"


def test_truncated_page_is_flagged_and_commented() -> None:
    doc = _doc("<BLOCK>text [1, 2, 3, 4]<CHILD>cut here")
    doc.pages[0].result = PageResult(1, doc.pages[0].text, "length")
    rendered = render_document(doc)
    assert "<!-- page 1: output truncated at the token limit -->" in rendered.markdown
    assert "truncated" in rendered.json["pages"][0]["flags"]


def test_page_markers_with_labels() -> None:
    doc = _doc("<BLOCK>text [1, 2, 3, 4]<CHILD>One.", "<BLOCK>text [1, 2, 3, 4]<CHILD>Two.")
    doc.pages[0].geometry = PageGeometry(1000, 2000, label="iv")
    doc.pages[1].geometry = PageGeometry(1000, 2000, label="2")
    markdown = render_document(doc, RenderOptions(page_markers=True)).markdown
    assert markdown == "<!-- page 1 (label iv) -->\n\nOne.\n\n<!-- page 2 -->\n\nTwo.\n"
    assert "<!--" not in render_document(doc).markdown


PARA_1 = "<BLOCK>text [1, 800, 900, 990]<CHILD>A sentence cut by the page break that contin-"
PARA_2 = "<BLOCK>text [1, 10, 900, 100]<CHILD>ues here."
HEAD_ROW = "<tr><td>h1</td><td>h2</td></tr>"
TABLE_1 = (
    f"<BLOCK>table [1, 500, 900, 990]<CHILD><table>{HEAD_ROW}<tr><td>a</td><td>b</td></tr></table>"
)
TABLE_2 = (
    f"<BLOCK>table [1, 10, 900, 500]<CHILD><table>{HEAD_ROW}<tr><td>c</td><td>d</td></tr></table>"
)
FURNITURE = "<BLOCK>page_number [450, 980, 550, 990]<CHILD>1<BLOCK>header [1, 1, 900, 5]<CHILD>Head"


def test_paragraph_merge_on_and_off() -> None:
    doc = _doc(PARA_1 + FURNITURE, FURNITURE + PARA_2)
    merged = render_document(doc)
    assert merged.markdown == "A sentence cut by the page break that continues here.\n"
    assert merged.json["merges"] == [
        {"kind": "paragraph", "first": {"page": 1, "block": 0}, "second": {"page": 2, "block": 2}}
    ]
    assert merged.json["pages"][0]["blocks"][0]["continued_by"] == [{"page": 2, "block": 2}]
    assert merged.json["pages"][1]["blocks"][2]["continues"] == {"page": 1, "block": 0}
    apart = render_document(doc, RenderOptions(merge_paragraphs=False))
    assert apart.markdown == "A sentence cut by the page break that contin-\n\nues here.\n"
    assert apart.json["merges"] == []


def test_table_merge_on_and_off() -> None:
    doc = _doc(TABLE_1, TABLE_2)
    merged = render_document(doc).markdown
    assert merged == "| h1 | h2 |\n|---|---|\n| a | b |\n| c | d |\n"
    apart = render_document(doc, RenderOptions(merge_tables=False)).markdown
    assert apart.count("| h1 | h2 |") == 2


def test_tables_with_other_widths_do_not_merge() -> None:
    other = "<BLOCK>table [1, 10, 900, 500]<CHILD><table><tr><td>x</td></tr></table>"
    assert render_document(_doc(TABLE_1, other)).json["merges"] == []


def test_table_format_and_math_options() -> None:
    raw = (
        "<BLOCK>text [1, 2, 3, 4]<CHILD>Let \\(x\\) be."
        "<BLOCK>equation [1, 2, 3, 4]<CHILD>\\[\nx = 1\n\\]"
        "<BLOCK>table [1, 2, 3, 4]<CHILD><table><tr><td>a</td></tr></table>"
    )
    latex = render_document(_doc(raw), RenderOptions(math="latex", table_format="html")).markdown
    assert latex == (
        "Let \\(x\\) be.\n\n\\[\nx = 1\n\\]\n\n<table>\n<tr><td>a</td></tr>\n</table>\n"
    )
    dollar = render_document(_doc(raw)).markdown
    assert dollar == "Let $x$ be.\n\n$$\nx = 1\n$$\n\n| a |\n|---|\n"


def test_sentinels_are_dropped() -> None:
    raw = (
        "<BLOCK>text [1, 2, 3, 4]<CHILD>[Non-Text]"
        "<BLOCK>text [1, 2, 3, 4]<CHILD>The image is too blurry to recognize any text content."
        "<BLOCK>text [1, 2, 3, 4]<CHILD>The image contains no text or characters. It is a cat."
        "<BLOCK>text [1, 2, 3, 4]<CHILD>Real."
    )
    rendered = render_document(_doc(raw))
    assert rendered.markdown == "Real.\n"
    flags = [b["flags"] for b in rendered.json["pages"][0]["blocks"]]
    assert flags == [["sentinel"], ["sentinel"], ["sentinel"], []]


def test_no_wrapper_html_anywhere() -> None:
    raw = (
        "<BLOCK>text [1, 2, 3, 4]<CHILD><div align=center><img src=x>Hi</div>"
        "<BLOCK>table [1, 2, 3, 4]<CHILD><div><table><tr><td><img src=y>c</td></tr></table></div>"
        "<BLOCK>image_caption [1, 2, 3, 4]<CHILD><img src=z> cap"
        "<BLOCK>image [10, 10, 20, 20]"
    )
    markdown = render_document(_doc(raw)).markdown
    assert not re.search(r"<\s*(div|img)", markdown, re.I)


def test_heading_levels_and_title_promotion() -> None:
    raw = (
        "<BLOCK>title [1, 2, 3, 4]<CHILD>My Report"
        "<BLOCK>title [1, 2, 3, 4]<CHILD>1 Intro"
        "<BLOCK>title [1, 2, 3, 4]<CHILD>1.1 Sub"
        "<BLOCK>title [1, 2, 3, 4]<CHILD>Acknowledgements"
    )
    assert render_document(_doc(raw)).markdown == (
        "# My Report\n\n## 1 Intro\n\n### 1.1 Sub\n\n## Acknowledgements\n"
    )


def test_list_container_with_own_content_and_numbered_items() -> None:
    raw = "<BLOCK>list [1, 2, 500, 500]<CHILD>1. one\n2. two\n3) three"
    assert render_document(_doc(raw)).markdown == "1. one\n2. two\n3. three\n"
    raw = "<BLOCK>list [1, 2, 500, 500]<CHILD>• one\n▪ two"
    assert render_document(_doc(raw)).markdown == "- one\n- two\n"


def test_list_items_must_lie_inside_the_list_box() -> None:
    raw = (
        "<BLOCK>list [100, 100, 500, 200]"
        "<BLOCK>text [110, 110, 490, 150]<CHILD>• inside"
        "<BLOCK>text [100, 600, 900, 700]<CHILD>Outside paragraph."
    )
    assert render_document(_doc(raw)).markdown == "- inside\n\nOutside paragraph.\n"


def test_code_fence_longer_than_backticks_inside() -> None:
    raw = "<BLOCK>code [1, 2, 3, 4]<CHILD>x = '```'"
    assert render_document(_doc(raw)).markdown == "````\nx = '```'\n````\n"


@pytest.mark.parametrize("fmt", ["auto", "gfm", "html"])
def test_empty_document(fmt) -> None:
    rendered = render_document(_doc(), RenderOptions(table_format=fmt))
    assert rendered.markdown == ""
    assert rendered.json["pages"] == []


@pytest.mark.parametrize(
    ("label", "content", "expected"),
    [
        ("text", "# not a heading", "\\# not a heading"),
        ("text", "```python", "\\```python"),
        ("text", "~~~", "\\~~~"),
        ("text", "[1]: http://x", "\\[1]: http://x"),
        ("text", "> quote", "\\> quote"),
        ("text", "+ plus", "\\+ plus"),
        ("text", "***", "\\***"),
        ("text", "a\r# b", "a # b"),
        # List markers, in every paragraph-like block; a year without a dot stays as it is.
        ("image_caption", "- > quoted", "\\- > quoted"),
        ("page_footnote", "1. > x", "1\\. > x"),
        ("ref_text", "2) # y", "2\\) # y"),
        ("text", "2023. A year.", "2023\\. A year."),
        ("text", "2023 was a year.", "2023 was a year."),
    ],
)
def test_paragraphs_cannot_become_other_blocks(label, content, expected) -> None:
    markdown = render_document(_doc(f"<BLOCK>{label} [1, 2, 3, 4]<CHILD>{content}")).markdown
    assert markdown == expected + "\n"


def test_display_math_has_no_blank_lines() -> None:
    raw = "<BLOCK>equation [1, 2, 3, 4]<CHILD>\\[\na\n\n\nb\n\\]"
    assert render_document(_doc(raw)).markdown == "$$\na\nb\n$$\n"


def test_figure_container_is_not_cropped_twice() -> None:
    raw = (
        "<BLOCK>image_block [100, 100, 900, 600]"
        "<BLOCK>image [110, 110, 890, 500]"
        "<BLOCK>image_caption [110, 510, 890, 590]<CHILD>Figure 1: Inner"
    )
    rendered = render_document(_doc(raw))
    assert [c.filename for c in rendered.images] == ["images/page-0001-figure-01.png"]
    assert rendered.images[0].bbox_px == (110, 220, 890, 1000)
    assert rendered.markdown.count("![") == 1
    assert rendered.json["pages"][0]["blocks"][0]["container_of"] == 1


def test_bulleted_text_blocks_without_a_container_become_a_list() -> None:
    raw = (
        "<BLOCK>text [1, 2, 3, 4]<CHILD>Intro:"
        "<BLOCK>text [1, 2, 3, 4]<CHILD>• first"
        "<BLOCK>text [1, 2, 3, 4]<CHILD>● second"
        "<BLOCK>text [1, 2, 3, 4]<CHILD>- third"
        "<BLOCK>text [1, 2, 3, 4]<CHILD>After."
        "<BLOCK>text [1, 2, 3, 4]<CHILD>-5 degrees is cold."
    )
    assert render_document(_doc(raw)).markdown == (
        "Intro:\n\n- first\n- second\n- third\n\nAfter.\n\n-5 degrees is cold.\n"
    )


def test_a_renderer_bug_costs_one_page_not_the_document(monkeypatch) -> None:
    from hpdparse.markdown import build

    def broken(self, block):
        raise RuntimeError("bug")

    monkeypatch.setattr(build.PageBuilder, "_paragraph", broken)
    doc = _doc("<BLOCK>text [1, 2, 3, 4]<CHILD>x", "<BLOCK>title [1, 2, 3, 4]<CHILD>Fine")
    rendered = render_document(doc)
    assert rendered.markdown == ("<!-- page 1: not rendered (RuntimeError('bug')) -->\n\n## Fine\n")
    assert rendered.json["pages"][0]["flags"] == ["render_error"]
    assert rendered.json["pages"][0]["blocks"][0]["text"] == "x"
