"""The raw stream parser: the grammar, and every malformed input it must survive."""

from __future__ import annotations

import pytest

from hpdparse.hpd.labels import LABEL_ROLES, role_of
from hpdparse.hpd.stream import bbox_to_pixels, cut_repetition, parse_page


def test_well_formed_page() -> None:
    raw = (
        "<BLOCK>doc_title [100, 50, 900, 90]<CHILD>Title\n"
        "<BLOCK>image [100, 100, 500, 400]\n"
        "<BLOCK>text [100, 410, 900, 500]<CHILD>Body text."
    )
    page = parse_page(raw, "stop")
    assert [(b.index, b.label, b.role, b.bbox, b.content) for b in page.blocks] == [
        (0, "doc_title", "title", (100, 50, 900, 90), "Title"),
        (1, "image", "figure", (100, 100, 500, 400), None),
        (2, "text", "text", (100, 410, 900, 500), "Body text."),
    ]
    assert page.flags == []
    assert all(b.flags == [] for b in page.blocks)


@pytest.mark.parametrize(
    ("box", "expected", "flags"),
    [
        ("[1, 2, 3, 4]", (1, 2, 3, 4), []),
        ("[1,2,3,4]", (1, 2, 3, 4), []),
        ("[1.4, 2.6, 3.5, 4.0]", (1, 3, 4, 4), []),
        ("[-5, 10, 1200, 20]", (0, 10, 1000, 20), ["box_clamped"]),
        ("[500, 600, 100, 200]", (100, 200, 500, 600), ["box_swapped"]),
        ("[1, 2, 3]", None, ["bad_box"]),
        ("[1, 2, 3, 4, 5]", None, ["bad_box"]),
        ("[10, 10, 10, 20]", None, ["bad_box"]),
        ("[1e999, 0, 10, 10]", None, ["bad_box"]),
        ("[12, 34", None, ["bad_box"]),
    ],
)
def test_malformed_boxes_keep_the_text(box, expected, flags) -> None:
    page = parse_page(f"<BLOCK>text {box}<CHILD>kept", "stop")
    (block,) = page.blocks
    assert block.content == "kept"
    assert block.bbox == expected
    assert block.flags == flags


def test_content_without_header_is_kept() -> None:
    page = parse_page("plain text<BLOCK>text [1, 2, 3, 4]<CHILD>x", "stop")
    assert page.blocks[0].content == "plain text"
    assert page.blocks[0].flags == ["no_header"]
    assert parse_page("only text, no grammar at all", "stop").blocks[0].content == (
        "only text, no grammar at all"
    )


def test_header_without_label_and_unknown_labels() -> None:
    page = parse_page("<BLOCK>[1, 2, 3, 4]<CHILD>a<BLOCK>brand_new [1, 2, 3, 4]<CHILD>b", "stop")
    assert (page.blocks[0].label, page.blocks[0].role, page.blocks[0].flags) == (
        "",
        "text",
        ["no_label"],
    )
    assert (page.blocks[1].label, page.blocks[1].role) == ("brand_new", "text")


def test_block_text_without_child_marker() -> None:
    (block,) = parse_page("<BLOCK>text [1, 2, 3, 4]hello", "stop").blocks
    assert block.content == "hello"
    assert "no_child_marker" in block.flags


def test_garbage_after_block_token_is_content() -> None:
    (block,) = parse_page("<BLOCK>Hello world", "stop").blocks
    assert block.content == "Hello world"
    assert block.label == ""


def test_leaked_control_tokens_keep_text_drop_tags() -> None:
    raw = "<BLOCK>text [1, 2, 3, 4]<CHILD>one text [5, 6, 7, 8]<CHILD>two<FORK>three <CHILD>four"
    (block,) = parse_page(raw, "stop").blocks
    assert block.content.split() == ["one", "twothree", "four"]
    assert "leaked_tokens" in block.flags
    assert "leaked_tokens" in parse_page(raw, "stop").flags


def test_leaked_box_after_ordinary_word_keeps_the_word() -> None:
    (block,) = parse_page("<BLOCK>text [1, 2, 3, 4]<CHILD>see [1, 2]<CHILD>table", "stop").blocks
    assert block.content.split() == ["see", "table"]


def test_stop_tokens_removed() -> None:
    raw = "<BLOCK>text [1, 2, 3, 4]<CHILD>done<|im_end|><|endoftext|>"
    assert parse_page(raw, "stop").blocks[0].content == "done"


def test_unspliced_fork_counts_as_child() -> None:
    page = parse_page("<BLOCK>text [1, 2, 3, 4]<FORK><BLOCK>image [5, 6, 7, 8]", "stop")
    assert page.blocks[0].content == ""
    assert page.blocks[1].content is None


@pytest.mark.parametrize("raw", ["", "   \n\n", "<BLOCK>", "<|im_end|>"])
def test_empty_output(raw) -> None:
    page = parse_page(raw, "stop")
    assert "empty" in page.flags or all(not b.content for b in page.blocks)


def test_truncated_page_flags_page_and_last_block() -> None:
    page = parse_page("<BLOCK>text [1, 2, 3, 4]<CHILD>a<BLOCK>text [1, 2, 3, 4]<CHILD>b", "length")
    assert "truncated" in page.flags
    assert page.blocks[-1].flags == ["truncated"]
    assert page.blocks[0].flags == []


def test_repetition_loop_in_a_block_is_cut() -> None:
    raw = "<BLOCK>text [1, 2, 3, 4]<CHILD>Intro. " + "the cat sat " * 200
    page = parse_page(raw, "length")
    assert page.blocks[0].content == "Intro. the cat sat"
    assert "repetition" in page.blocks[0].flags
    assert "repetition" in page.flags


def test_repeated_line_loop_is_cut() -> None:
    raw = "<BLOCK>text [1, 2, 3, 4]<CHILD>Start\n" + "| 0 | 0 | 0 |\n" * 300 + "| 0 | 0"
    page = parse_page(raw, "length")
    assert page.blocks[0].content == "Start\n| 0 | 0 | 0 |"


def test_repeated_blocks_to_the_end_are_cut() -> None:
    raw = "<BLOCK>text [1, 2, 3, 4]<CHILD>first" + "<BLOCK>text [1, 2, 3, 4]<CHILD>again" * 40
    page = parse_page(raw, "length")
    assert [b.content for b in page.blocks] == ["first", "again"]
    assert "repeated_blocks" in page.flags
    assert "repetition" in page.blocks[-1].flags


def test_short_or_legitimate_repeats_are_not_loops() -> None:
    assert cut_repetition("ha ha ha ha") is None
    assert cut_repetition("Table of contents ........................ 3") is None
    text = "".join(f"Row {i}: value {i * 7}. " for i in range(60))
    assert cut_repetition(text) is None
    # A page that stopped normally needs a much longer loop to be cut.
    assert cut_repetition("x y " * 15, strict=True) is None
    assert cut_repetition("x y " * 25, strict=False) == "x y"


def test_huge_loops_are_cut_to_one_unit() -> None:
    assert cut_repetition("a" * 200_000) == "a"
    assert cut_repetition("abc " * 50_000) == "abc"


@pytest.mark.parametrize(
    "unit",
    [
        "| Total | " + "- " * 20 + "| 12 |\n",  # a rule of dashes inside each repeated row
        "=" * 40 + " row\n",
        "ab" * 30 + "abc ",
        "x" * 300 + "y",
    ],
)
def test_loop_whose_unit_holds_a_shorter_periodic_run_is_cut(unit: str) -> None:
    # The loop ends inside the run, so the nearest repeats of the text's end are the run's own.
    text = "Intro text. " + unit * 25 + unit[:30]
    assert cut_repetition(text) == ("Intro text. " + unit).rstrip()
    raw = "<BLOCK>table [1, 2, 3, 4]<CHILD>" + text
    assert parse_page(raw, "length").blocks[0].content == ("Intro text. " + unit).rstrip()


def test_both_vocabularies_map_to_roles() -> None:
    expected = {
        "doc_title": "title",
        "paragraph_title": "heading",
        "title": "heading",
        "equation": "formula",
        "formula": "formula",
        "formula_number": "formula_number",
        "image": "figure",
        "chart": "figure",
        "seal": "figure",
        "figure_title": "caption",
        "header_image": "header",
        "footer_image": "footer",
        "aside_text": "aside",
        "page_footnote": "footnote",
        "footnote": "footnote",
        "ref_text": "reference",
        "reference_content": "reference",
        "algorithm": "code",
        "abstract": "text",
        "content": "text",
        "index": "text",
        "phonetic": "text",
        "never_seen": "text",
    }
    assert {label: role_of(label) for label in expected} == expected
    assert all(role_of(label) for label in LABEL_ROLES)


def test_labels_are_normalised() -> None:
    (block,) = parse_page("<BLOCK>Doc-Title [1, 2, 3, 4]<CHILD>x", "stop").blocks
    assert (block.label, block.role) == ("doc_title", "title")


def test_bbox_to_pixels_rounds_outward_and_clamps() -> None:
    assert bbox_to_pixels((100, 200, 300, 400), 1654, 2339) == (165, 467, 497, 936)
    assert bbox_to_pixels((0, 0, 1000, 1000), 10, 10) == (0, 0, 10, 10)
    assert bbox_to_pixels(None, 10, 10) is None
    assert bbox_to_pixels((1, 1, 2, 2), 0, 0) is None


def test_non_string_input_never_raises() -> None:
    page = parse_page(None, None)  # type: ignore[arg-type]
    assert (page.blocks, page.flags) == ([], ["empty"])
    assert parse_page(b"<BLOCK>text [1, 2, 3, 4]<CHILD>x", None).blocks  # type: ignore[arg-type]


def test_repeated_groups_of_blocks_are_cut() -> None:
    group = "<BLOCK>text [1, 2, 3, 4]<CHILD>a<BLOCK>image [5, 6, 7, 8]"
    page = parse_page("<BLOCK>title [1, 2, 3, 4]<CHILD>T" + group * 20, "length")
    assert [(b.label, b.content) for b in page.blocks] == [
        ("title", "T"),
        ("text", "a"),
        ("image", None),
    ]
    assert page.blocks[-1].flags == ["repetition", "truncated"]


def test_distinct_blocks_are_not_repetition() -> None:
    raw = "".join(f"<BLOCK>text [1, 2, 3, 4]<CHILD>line {i}" for i in range(30))
    assert len(parse_page(raw, "length").blocks) == 30
    images = "".join(f"<BLOCK>image [{i}, 2, {i + 10}, 40]" for i in range(30))
    assert len(parse_page(images, "length").blocks) == 30


def test_finished_page_needs_identical_boxes_to_call_blocks_a_loop() -> None:
    form = "".join(
        f"<BLOCK>text [10, {y}, 50, {y + 5}]<CHILD>Yes<BLOCK>text [60, {y}, 90, {y + 5}]<CHILD>No"
        for y in range(0, 600, 50)
    )
    assert len(parse_page(form, "stop").blocks) == 24
    assert len(parse_page(form, "length").blocks) == 2
