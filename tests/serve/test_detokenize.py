"""Incremental detokenization with the tiny checkpoint's real tokenizer: characters split across
tokens are held back until whole, and the pieces add up to the whole text."""

from __future__ import annotations

import pytest

pytest.importorskip("tokenizers")

from hpdparse.hpd.prompt import load_tokenizer
from hpdparse.serve.answers import IncrementalText
from tests.helpers.paths import TINY

TEXT = "<BLOCK>text [1, 2, 3, 4]<CHILD>Ünïcödé 数学公式 ∑ x² € 🙂 done<BLOCK>page_number"


@pytest.fixture(scope="module")
def tokenizer():
    return load_tokenizer(TINY, str(TINY))


def _decode(tokenizer):
    return lambda ids: tokenizer.decode(ids, skip_special_tokens=False)


@pytest.mark.parametrize("batch", [1, 2, 3, 7])
def test_pieces_are_whole_characters_and_add_up_to_the_text(tokenizer, batch: int) -> None:
    ids = tokenizer.encode(TEXT, add_special_tokens=False).ids
    decode = _decode(tokenizer)
    assert decode(ids) == TEXT
    assert any("\ufffd" in decode([i]) for i in ids), "no character split across tokens"
    text = IncrementalText(decode)
    pieces = [text.add(ids[i : i + batch]) for i in range(0, len(ids), batch)]
    assert all("\ufffd" not in piece for piece in pieces)
    assert "".join(pieces) + text.rest(TEXT) == TEXT
    assert sum(1 for piece in pieces if piece) > 3


def test_text_that_is_not_the_start_of_the_final_text_is_an_error(tokenizer) -> None:
    text = IncrementalText(_decode(tokenizer))
    text.add(tokenizer.encode("<BLOCK>text", add_special_tokens=False).ids)
    with pytest.raises(ValueError, match="not the start"):
        text.rest("<BLOCK>table")
