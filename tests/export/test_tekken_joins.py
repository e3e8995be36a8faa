"""The Tekken count of texts joined by a blank line, from the texts' counts (`tekken_joins`),
against tiktoken's count of the joined text, on texts made to hit every piece boundary the
rules rely on: letters of every case and script, marks, digits of several scripts,
punctuation runs with "/", whitespace of every kind (newlines, Unicode spaces), empty texts."""

from __future__ import annotations

import random

import pytest
import regex

pytest.importorskip("docling_core")

from hypothesis import given, settings
from hypothesis import strategies as st

from hpdparse.export.tekken_joins import JOIN, PATTERN, _last_boundary, joined_counter
from hpdparse.export.tokenizers import _tekken, _tekken_count, load_tokenizer
from hpdparse.export.tokenizers import joined_counter as for_tokenizer

ALPHABET = (
    "abcXYZ éÀß"
    "ǅ"
    "ʰ"
    "中文"
    "\u0301\u0308"  # letters of each case, titlecase, modifier, marks
    "0129"
    "٣"
    "½"
    "²"  # digits, other numbers
    ".,;:!?-()[]{}$\\|/*#`'\""
    "…—€"  # punctuation and symbols
    " \t\n\r\x0b\x0c\xa0\u2003\u3000\x1c"  # whitespace, Python's and the regex's
    "😀"
)
text = st.text(alphabet=ALPHABET, max_size=30)


def whole(parts: list[str]) -> int:
    return _tekken_count(JOIN.join(parts))


def test_the_pattern_is_tekkens() -> None:
    assert _tekken()._model._pat_str == PATTERN


@settings(max_examples=1500, deadline=None, derandomize=True)
@given(st.lists(text, min_size=1, max_size=5))
def test_joined_counts_equal_whole_counts(parts: list[str]) -> None:
    assert joined_counter(_tekken_count)(parts) == whole(parts)


def test_joined_counts_on_block_like_texts() -> None:
    """Texts like blocks: words, numbers, math, tables, trailing punctuation, long tails with
    no ASCII boundary (counted whole)."""
    rng = random.Random(7)
    words = ["The", "model", "3.5", "$x^2$", "(see", "Fig.", "2)", "—", "naïve", "中文文本"]
    words += ["| a | b |", "|---|---|", "**bold**", "http://x.y/z", "1,234", "x/y", "…", "ok."]
    count = joined_counter(_tekken_count)
    for _ in range(3000):
        parts = [
            " ".join(rng.choice(words) for _ in range(rng.randint(1, 12)))
            for _ in range(rng.randint(2, 6))
        ]
        if rng.random() < 0.2:
            parts[-1] += "中" * 80  # no ASCII boundary near the end
        assert count(parts) == whole(parts), parts


def test_the_tokenizers_joined_counter() -> None:
    parts = ["Intro", "A paragraph.", "/etc/hosts", " indented", ""]
    assert for_tokenizer(load_tokenizer(None, 512))(parts) == whole(parts)


def piece_starts(text: str) -> set[int]:
    """Where tiktoken's pieces start (the `regex` module, which tiktoken installs, with the same
    pattern), and the end."""
    return {m.start() for m in regex.finditer(PATTERN, text)} | {len(text)}


@settings(max_examples=1500, deadline=None, derandomize=True)
@given(text, text)
def test_the_places_used_are_piece_starts(a: str, b: str) -> None:
    """The module's two rules, checked on the pieces themselves: the boundary found near a
    text's end starts a piece in the text and in the text followed by a blank line; a text
    that starts with neither whitespace nor "/" starts a piece after a blank line."""
    boundary = _last_boundary(a)
    if boundary is not None:
        assert boundary in piece_starts(a) and boundary in piece_starts(a + JOIN)
    if b and not b[0].isspace() and b[0] != "/":
        assert len(a + JOIN) in piece_starts(a + JOIN + b)
