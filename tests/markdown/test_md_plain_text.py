"""plain_text (the export's item texts) is render_inline in plain mode, made faster: the same
string for every text, hand-picked and random."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hpdparse.markdown.text import MODE_PLAIN, plain_text, render_inline

CASES = [
    "",
    "   ",
    "plain words",
    "  padded  ",
    "two  spaces and\ttab",
    "line one\nline two\n\n third",
    "中文\n中文",
    "nbsp\u00a0\u00a0twice and\r\ncrlf\fform\vvt",
    "a < b > c & d | e $5",
    "inline \\(x^2 + y_{1}\\) math",
    "display \\[ \\frac{a}{b} \\] in text",
    "unclosed \\(x + y",
    "unclosed display \\[x",
    "empty \\(\\) and \\[ \\]",
    "two \\(a\\) and \\(b < c\\) and \\(d $ e\\)",
    "\\(  spaced   latex \n over lines \\)",
    "escaped \\\\( not math",
    "back\\slash alone",
    "\\(\\text{x}\\)\n\\[y\\]",
    "trailing \\",
    "Model 5-0",
    "\\(\\pm 5.0\\)",
]


@pytest.mark.parametrize("text", CASES)
def test_plain_text_is_render_inline_in_plain_mode(text: str) -> None:
    assert plain_text(text) == render_inline(text, dollar=True, mode=MODE_PLAIN)


_PIECES = st.sampled_from(
    ["\\(", "\\)", "\\[", "\\]", "\\", " ", "  ", "\n", "\t", "\u00a0", "\r", "x", "中", "$",
     "<", "|", "&", "a^2", "\\frac{1}{2}", "\\text{ }", "%", "{", "}"]
)  # fmt: skip


@settings(max_examples=400, deadline=None, database=None,
          suppress_health_check=[HealthCheck.too_slow])  # fmt: skip
@given(text=st.lists(_PIECES, max_size=30).map("".join) | st.text(max_size=60))
def test_plain_text_matches_on_random_texts(text: str) -> None:
    assert plain_text(text) == render_inline(text, dollar=True, mode=MODE_PLAIN)
