"""The Tekken token count of texts joined by a blank line, from the counts of the texts.

The chunker counts windows of blocks joined by "\\n\\n" (a chunk's headings, then its blocks'
texts), each window again as it grows: re-encoding them took most of its time. tiktoken cuts a
text into pieces with its pattern (below, Tekken's), then encodes each piece alone, so a count
is the sum of its pieces' counts. The pattern has no look-behind and no anchors; a piece never
holds a newline followed by a letter, digit or punctuation other than "/" (the only pieces that
go past a newline are whitespace, and punctuation runs taking trailing "\\r", "\\n" or "/"). So:

- where `b` starts with neither whitespace nor "/", a piece starts at `b` in `a + "\\n\\n" + b`
  as in `b` alone: count(a + "\\n\\n" + b) = count(a + "\\n\\n") + count(b);
- a digit is always a piece of its own, and a letter's piece (letters and marks) ends at an
  ASCII character that is not a letter: after such a place `j` in `a`, count(a) = count(a[:j]) +
  count(a[j:]) and count(a + "\\n\\n") = count(a[:j]) + count(a[j:] + "\\n\\n").

Anything else (a text starting with whitespace or "/", no such place near a text's end) is
counted whole. tests/export/test_tekken_joins.py compares with whole counts on many texts."""

from __future__ import annotations

from collections.abc import Callable

JOIN = "\n\n"
PATTERN = (  # Tekken's tiktoken pattern, for which the rules above hold
    r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+|"
    r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*|"
    r"\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)
_TAIL_SEARCH = 64  # characters looked at from a text's end for a piece boundary
_ASCII_LETTERS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")
_ASCII_DIGITS = frozenset("0123456789")


def joined_counter(count: Callable[[str], int]) -> Callable[[list[str]], int]:
    """count(JOIN.join(parts)) from `count` of each part (remembered by `count`) and of short
    tails, for a `count` made with `PATTERN`."""

    with_join: dict[str, int] = {}  # text -> count(text + JOIN), for this counter's texts

    def count_joined(parts: list[str]) -> int:
        if len(parts) == 1:
            return count(parts[0])
        for part in parts[1:]:
            if not part or part[0].isspace() or part[0] == "/":
                return count(JOIN.join(parts))
        total = count(parts[-1])
        for part in parts[:-1]:
            if part not in with_join:
                with_join[part] = _with_join(part, count)
            total += with_join[part]
        return total

    return count_joined


def _with_join(text: str, count: Callable[[str], int]) -> int:
    """count(text + JOIN)."""
    boundary = _last_boundary(text)
    if boundary is None:
        return count(text + JOIN)
    tail = text[boundary:]
    return count(text) - (count(tail) if tail else 0) + count(tail + JOIN)


def _last_boundary(text: str) -> int | None:
    """The last place near the end where a piece surely starts (see the module's rules)."""
    stop = max(len(text) - _TAIL_SEARCH, 1)
    for j in range(len(text), stop - 1, -1):
        before = text[j - 1]
        if before in _ASCII_DIGITS:
            return j
        after = text[j : j + 1]  # "" at the end
        if before in _ASCII_LETTERS and after < "\x80" and after not in _ASCII_LETTERS:
            return j
    return None
