"""Cross-page paragraph rules."""

from __future__ import annotations

import pytest

from hpdparse.markdown.merge import continues_paragraph, join_paragraphs


@pytest.mark.parametrize(
    ("first", "second", "expected"),
    [
        ("the parser handles long docu-", "ments without loss.", True),
        ("as shown by", "Smith et al. in 2020.", True),
        ("values such as x,", "y and z.", True),
        ("这是一个没有结束的", "句子。", True),
        ("This sentence ended.", "this one starts lower.", False),
        ("What a result!", "New paragraph", False),
        ("ends with a number 42", "New paragraph", False),
        ("Figure 3", "Results are good.", False),
        ("the list follows", "- first item", False),
        ("the list follows", "1. first item", False),
        ("", "x", False),
    ],
)
def test_continues_paragraph(first, second, expected) -> None:
    assert continues_paragraph(first, second) is expected


@pytest.mark.parametrize(
    ("first", "second", "joined"),
    [
        ("long docu-", "ments here.", "long documents here."),
        ("well-", "Known", "well- Known"),
        ("as shown by", "Smith.", "as shown by Smith."),
        ("这是一个", "句子。", "这是一个句子。"),
    ],
)
def test_join_paragraphs(first, second, joined) -> None:
    assert join_paragraphs(first, second) == joined
