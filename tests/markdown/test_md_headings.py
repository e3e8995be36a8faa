"""Heading levels from numbering, consistent over the document."""

from __future__ import annotations

import pytest

from hpdparse.markdown.headings import assign_levels, heading_markdown, numbering


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("1 Introduction", ("arabic", 1)),
        ("1. Introduction", ("arabic", 1)),
        ("2.3 Results", ("arabic", 2)),
        ("2.3.1. Details", ("arabic", 3)),
        ("IV. METHOD", ("roman", 1)),
        ("B. Data", ("letter", 1)),
        ("A.1 Proof", ("letter_dotted", 2)),
        ("一、总则", ("cn_num", 1)),
        ("（二）目的", ("cn_paren", 1)),
        ("第三章 方法", ("cn_chapter", 1)),
        ("第一节 概述", ("cn_section", 1)),
        ("(1) Setup", ("paren_arabic", 1)),
        ("a) Setup", ("lower_letter", 1)),
        ("Introduction", None),
        ("2023 Annual Report", None),
        ("A Study of Things", None),
    ],
)
def test_numbering(text, expected) -> None:
    assert numbering(text) == expected


@pytest.mark.parametrize(
    ("headings", "levels"),
    [
        (
            ["Abstract", "1 Intro", "1.1 Bg", "1.1.1 Deep", "2 Method", "References", "A Proofs"],
            [1, 1, 2, 3, 1, 1, 1],
        ),
        (["I. INTRO", "A. Setup", "B. Data", "C. Results", "II. METHOD"], [1, 2, 2, 2, 1]),
        (["A. Proofs", "A.1 Lemma", "B. More"], [1, 2, 1]),
        (["1 Intro", "A. Appendix"], [1, 1]),
        (["一、总则", "（一）目的", "1. 细节", "二、附则"], [1, 2, 3, 1]),
        (["第一章 总则", "第一节 目的", "一、范围"], [1, 2, 3]),
        (["2.1 Only subsections", "2.2 Here"], [1, 1]),
        (
            ["1 A", "1.1 B", "1.1.1 C", "1.1.1.1 D", "1.1.1.1.1 E", "1.1.1.1.1.1 F"],
            [1, 2, 3, 4, 5, 5],
        ),
        ([], []),
    ],
)
def test_assign_levels(headings, levels) -> None:
    assert assign_levels(headings) == levels


def test_heading_markdown() -> None:
    assert heading_markdown("Title", 0) == "# Title"
    assert heading_markdown("1 Intro", 1) == "## 1 Intro"
    assert heading_markdown("deep", 9) == "###### deep"
