"""Property tests: any stream, however broken, renders without raising, to valid UTF-8, with no
HTML outside the allowed table tags. A longer run: benchmarks/fuzz_stream.py."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hpdparse.hpd.stream import parse_page
from hpdparse.markdown.render import RenderOptions
from tests.helpers.stream_strategies import (
    check_document,
    disallowed_html,
    grammar_streams,
    options_strategy,
    random_streams,
    rendered_html_problems,
)

# 500 fresh examples a property at each run (no example database: every run draws new ones);
# the long run is benchmarks/fuzz_stream.py.
PROPERTY_SETTINGS = settings(
    max_examples=500,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


@PROPERTY_SETTINGS
@given(raw=random_streams(), finish=st.sampled_from(["stop", "length"]))
def test_random_streams_never_break_the_parser(raw: str, finish: str) -> None:
    page = parse_page(raw, finish)
    for block in page.blocks:
        assert block.bbox is None or all(0 <= v <= 1000 for v in block.bbox)
        assert block.content is None or "<CHILD>" not in block.content


@PROPERTY_SETTINGS
@given(
    raws=st.lists(random_streams(), min_size=1, max_size=3),
    finish=st.sampled_from(["stop", "length"]),
    options=options_strategy,
)
def test_random_streams_render_safely(raws, finish, options) -> None:
    check_document(raws, finish, options)


@PROPERTY_SETTINGS
@given(
    raws=st.lists(grammar_streams(), min_size=1, max_size=3),
    finish=st.sampled_from(["stop", "length"]),
    options=options_strategy,
)
def test_corrupted_grammar_streams_render_safely(raws, finish, options) -> None:
    check_document(raws, finish, options)


def test_lone_surrogates_become_valid_utf8() -> None:
    check_document(["<BLOCK>text [1, 2, 3, 4]<CHILD>bad \ud800 char"], "stop", RenderOptions())


def test_the_html_check_itself_catches_markup() -> None:
    assert disallowed_html("a <div>b</div>") == ["<div>b</div>", "</div>"]
    assert disallowed_html("<img src=x>") != []
    assert disallowed_html("<td style=x>") != []
    assert disallowed_html("<!-- a --> b -->") == []
    assert disallowed_html("<!-- a -- b -->") != []
    assert disallowed_html('<table>\n<tr><td rowspan="2">a<br>b</td></tr>\n</table>') == []
    assert disallowed_html("```\n<div>\n```\n") == []  # code is literal text
    assert disallowed_html("a &lt;div> and $a\\lt b$") == []


def test_the_rendered_html_check_itself() -> None:
    assert rendered_html_problems("<div>x</div>") == ["<div>", "</div>"]
    assert rendered_html_problems("![a](http://evil/x.png)") != []
    assert rendered_html_problems('<table>\n<tr><td rowspan="2">a</td></tr>\n</table>') == []
    assert rendered_html_problems("![a](images/page-0001-figure-01.png)\n\n# T\n\n- x") == []
    assert rendered_html_problems("```python\n<div>\n```") == []
