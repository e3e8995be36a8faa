"""Each formula cleanup with the examples it exists for."""

from __future__ import annotations

import pytest

from hpdparse.markdown.formulas import (
    balance_braces,
    clean_latex,
    close_display,
    display_math,
    drop_degenerate_tail,
    inline_math,
    remove_tag,
    simplify_left_right,
    split_display,
    unicode_to_latex,
    with_tag,
    wrap_arithmetic,
)


@pytest.mark.parametrize(
    ("content", "expected", "closed"),
    [
        ("\\[\nx = 1\n\\]", "\\[\nx = 1\n\\]", False),
        ("\\[\nx = 1", "\\[\nx = 1\n\\]", True),  # cut off by the token limit
        ("\\[", "\\[\n\\]", True),
        ("$$x", "$$x\n$$", True),
        ("x = 1", "x = 1", False),
    ],
)
def test_close_display(content, expected, closed) -> None:
    assert close_display(content) == (expected, closed)


def test_split_display_strips_delimiters_and_splits_several() -> None:
    assert split_display("\\[\nE = mc^2\n\\]") == (["E = mc^2"], False)
    assert split_display("\\[a\\]\n\\[b\\]") == (["a", "b"], False)
    assert split_display("$$ a $$") == (["a"], False)
    assert split_display("\\( a \\)") == (["a"], False)
    assert split_display("a + b") == (["a + b"], False)
    assert split_display("\\[\n\\]") == ([], False)


def test_remove_tag_and_put_it_back() -> None:
    assert remove_tag("x = 1 \\tag{3}") == ("x = 1", "3")
    assert remove_tag("x = 1 \\tag*{A.2}") == ("x = 1", "A.2")
    assert remove_tag("x = 1") == ("x = 1", None)
    assert with_tag("x = 1", "3") == "x = 1 \\tag{3}"
    assert with_tag("x = 1", None) == "x = 1"


@pytest.mark.parametrize(
    ("latex", "expected"),
    [
        ("a_1 + \\cdots \\cdots \\cdots \\cdots", "a_1 + \\cdots"),
        ("a, \\ldots, \\ldots, \\ldots", "a, \\ldots"),
        ("a + ... ... ...", "a + ..."),
        ("x = 1 \\quad \\quad", "x = 1"),
        ("x = 1 \\qquad", "x = 1"),
        ("x = 1 \\, ~", "x = 1"),
        ("x = 1 \\\\", "x = 1"),
        ("a + \\cdots + b", "a + \\cdots + b"),  # an ellipsis inside is not a tail
    ],
)
def test_drop_degenerate_tail(latex, expected) -> None:
    assert drop_degenerate_tail(latex) == expected


@pytest.mark.parametrize(
    ("latex", "expected"),
    [
        ("\\left( x + 1 \\right)", "(x + 1)"),
        ("\\left[ x \\right]", "[x]"),
        ("\\left( \\frac{a}{b} \\right)", "\\left( \\frac{a}{b} \\right)"),
        ("\\left( \\sum_i x_i \\right)^2", "\\left( \\sum_i x_i \\right)^2"),
        ("\\left( a \\left( b \\right) \\right)", "(a (b))"),
        ("\\left( \\frac{1}{2} \\left( b \\right) \\right)", "\\left( \\frac{1}{2} (b) \\right)"),
        ("\\left\\{ x \\right\\}", "\\left\\{ x \\right\\}"),  # only ( and [
    ],
)
def test_simplify_left_right(latex, expected) -> None:
    assert simplify_left_right(latex) == expected


@pytest.mark.parametrize(
    ("latex", "expected"),
    [
        ("a × b", "a \\times b"),
        ("a×b", "a\\times b"),
        ("x ≤ 3", "x \\leq 3"),
        ("10 ÷ 2", "10 \\div 2"),
        ("α+β", "\\alpha+\\beta"),
        ("αx", "\\alpha x"),
        ("a − b", "a - b"),
        ("90°", "90^{\\circ}"),
        ("x_1, …, x_n", "x_1, \\ldots, x_n"),
        ("plain", "plain"),
    ],
)
def test_unicode_to_latex(latex, expected) -> None:
    assert unicode_to_latex(latex) == expected


@pytest.mark.parametrize(
    ("latex", "expected"),
    [
        ("\\frac{a}{b", "\\frac{a}{b}"),
        ("x^{2}}", "x^{2}"),
        ("\\{ a \\}", "\\{ a \\}"),
        ("\\begin{matrix} a & b \\\\ c", "\\begin{matrix} a & b \\\\ c\\end{matrix}"),
        ("\\begin{cases} a \\end{cases}", "\\begin{cases} a \\end{cases}"),
        ("x + \\", "x + "),
        ("a \\\\", "a \\\\"),
    ],
)
def test_balance_braces(latex, expected) -> None:
    assert balance_braces(latex) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("12 ÷ 4 = 3", "\\(12 ÷ 4 = 3\\)"),
        ("3 + 4 = 7", "\\(3 + 4 = 7\\)"),
        ("The ratio 6 ÷ 2 is three", "\\(The ratio 6 ÷ 2 is three\\)"),
        ("2024", None),
        ("Page 3 of 7", None),
        ("\\(x\\) ÷ 2", None),
        ("", None),
    ],
)
def test_wrap_arithmetic(text, expected) -> None:
    assert wrap_arithmetic(text) == expected


def test_clean_latex_runs_every_cleanup() -> None:
    assert clean_latex("\\left( a × b \\right) \\quad \\tag{4}", display=True) == (
        "(a \\times b)",
        "4",
    )
    assert clean_latex("a\n+\n b", display=False) == ("a + b", None)


def test_delimiters_and_markdown_safety() -> None:
    assert display_math("x", dollar=True) == "$$\nx\n$$"
    assert display_math("x", dollar=False) == "\\[\nx\n\\]"
    assert inline_math("x", dollar=True) == "$x$"
    assert inline_math("x", dollar=False) == "\\(x\\)"
    assert inline_math("a<b", dollar=True) == "$a\\lt b$"  # cannot open an HTML tag
    assert inline_math("a < b", dollar=True) == "$a < b$"
    assert inline_math("cost $5", dollar=True) == "$cost \\$5$"


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ("a\n> b", "a > b"),
        ("> b\nc", "{}> b\nc"),
        ("x \\\\\n- y \\\\\n1. z", "x \\\\ - y \\\\ 1. z"),
        ("a\n==\nb", "a ==\nb"),
        ("a\n# b", "a # b"),
        ("50% of\n- x", "50\\% of - x"),
        ("\\begin{aligned}\na &= b \\\\\nc &= d\n\\end{aligned}", None),
    ],
)
def test_protect_display_lines(body, expected) -> None:
    from hpdparse.markdown.formulas import protect_display_lines

    assert protect_display_lines(body) == (body if expected is None else expected)
