"""Token log-probabilities cut into blocks, their compact encoding, and the block and page
confidence made of them."""

from __future__ import annotations

import math
import random

import pytest

from hpdparse.hpd.confidence import page_confidence, score_segment, segment_of_blocks
from hpdparse.hpd.fork_tree import ForkTree
from hpdparse.hpd.logprobs import PageLogprobs, Segment
from hpdparse.hpd.stream import FLAG_NO_HEADER, parse_page

BLOCK, CHILD, FORK, STOP = 1, 2, 3, 9


class Ids:
    block, child, fork = BLOCK, CHILD, FORK
    stop = frozenset({STOP})


def split(tokens: list[int], values: list[float]) -> PageLogprobs:
    return PageLogprobs.of_ids(tokens, values, Ids)


def test_tokens_are_cut_at_blocks_and_markers() -> None:
    # preamble 10 | <BLOCK> 11 <CHILD> 12 13 | <BLOCK> 14 (layout only) | <BLOCK> 15 <FORK> 16
    tokens = [10, BLOCK, 11, CHILD, 12, 13, BLOCK, 14, BLOCK, 15, FORK, 16]
    values = [-float(i) / 10 for i in range(len(tokens))]
    page = split(tokens, values)
    assert [(len(s.header), len(s.content)) for s in page.segments] == [
        (0, 1),
        (3, 2),
        (2, 0),
        (3, 1),
    ]
    assert page.segments[1].header == (-0.1, -0.2, -0.3)
    assert page.segments[1].content == (-0.4, -0.5)


def _cut_token_by_token(tokens: list[int], values: list[float]) -> list[tuple]:
    """The cutting rule stated one token at a time (the oracle for `split`'s slices)."""
    segments, header, content, in_header = [], [], [], False
    for token, value in zip(tokens, values, strict=True):
        if token == BLOCK:
            segments.append((tuple(header), tuple(content)))
            header, content, in_header = [value], [], True
        elif in_header:
            header.append(value)
            in_header = token not in (CHILD, FORK)
        else:
            content.append(value)
    return [*segments, (tuple(header), tuple(content))]


def test_ids_and_token_texts_are_cut_by_the_same_rule() -> None:
    rng = random.Random(21)
    for _ in range(2000):
        tokens = [rng.choice([BLOCK, CHILD, FORK, 5, 6, 7]) for _ in range(rng.randint(0, 30))]
        values = [-rng.random() for _ in tokens]
        want = _cut_token_by_token(tokens, values)
        texts = [str(t) for t in tokens]
        by_text = PageLogprobs.split(
            texts, values, lambda t: t == str(BLOCK), {str(CHILD), str(FORK)}.__contains__
        )
        for page in (split(tokens, values), by_text):
            assert [(s.header, s.content) for s in page.segments] == want, tokens


def test_no_logprobs_no_record() -> None:
    assert PageLogprobs.of_ids([BLOCK], None, Ids) is None
    with pytest.raises(ValueError):
        split([BLOCK, 5], [-0.1])


def test_the_encoding_is_compact_and_exact_to_half_a_millinat() -> None:
    values = [-0.0, -0.00049, -0.0123456, -1.5, -30.25, -70.0, -math.inf, float("nan")]
    page = PageLogprobs(
        (Segment((), tuple(values[:2])), Segment(tuple(values[2:5]), tuple(values[5:])))
    )
    record = page.to_json()
    assert record["segments"] == [[0, 2], [3, 3]]
    assert len(record["values"]) == math.ceil(2 * len(values) / 3) * 4  # base64 of 2 bytes each
    back = PageLogprobs.from_json(record)
    flat = [v for s in back.segments for v in (*s.header, *s.content)]
    for got, want in zip(flat[:5], values[:5], strict=True):
        assert abs(got - want) <= 0.0005
    assert flat[5:] == [-65.535, -65.535, -65.535]  # below the range, -inf and NaN: the floor


@pytest.mark.parametrize(
    "record",
    [
        None,
        {},
        {"encoding": "other"},
        {"encoding": "u16-millinats-b64", "segments": [[1, 1]], "values": "AAA="},
        {"encoding": "u16-millinats-b64", "segments": [[0, 1]], "values": "!!"},
        {"encoding": "u16-millinats-b64", "segments": [[-1, 2]], "values": "AAAAAA=="},
    ],
)
def test_a_record_that_is_not_one_reads_as_none(record: object) -> None:
    assert PageLogprobs.from_json(record) is None


def test_the_fork_tree_splices_logprobs_like_tokens() -> None:
    tree = ForkTree(Ids, forks=True, prompt_len=4, max_model_len=100)
    parent = tree.parent
    (child,) = tree.absorb(parent, [BLOCK, 20, FORK], [-0.1, -0.2, -0.3])
    tree.absorb(child, [30, 31, STOP], [-0.4, -0.5, -0.6])
    tree.finish(child, "stop")
    tree.absorb(parent, [BLOCK, 21, STOP], [-0.7, -0.8, -0.9])
    tree.finish(parent, "stop")
    assert tree.tokens() == [BLOCK, 20, CHILD, 30, 31, BLOCK, 21]
    logprobs = [-0.1, -0.2, -0.3, -0.4, -0.5, -0.7, -0.8]
    assert tree.tokens_and_logprobs() == (tree.tokens(), logprobs)


def test_a_branch_without_logprobs_gives_none() -> None:
    tree = ForkTree(Ids, forks=True, prompt_len=4, max_model_len=100)
    tree.absorb(tree.parent, [BLOCK, 20])
    assert tree.tokens_and_logprobs() == ([BLOCK, 20], None)


def test_block_and_page_scores() -> None:
    content = score_segment(Segment((-0.1,), (-0.01, -2.0, -0.02, -0.5, -0.03)))
    assert content.scored == "content" and content.tokens == 5
    assert content.min_logprob == -2.0
    assert content.weakest_logprob == pytest.approx((-2.0 - 0.5 - 0.03) / 3)
    assert content.confidence == pytest.approx(math.exp(content.weakest_logprob))
    header = score_segment(Segment((-0.2, -0.4), ()))
    assert header.scored == "header" and header.tokens == 2
    assert score_segment(Segment((), ())) is None
    # The page: its weakest content block; headers only count on a page without content.
    assert page_confidence([content, header, None]) == content.confidence
    assert page_confidence([header]) == header.confidence
    assert page_confidence([None]) is None


def test_segments_match_the_parsed_blocks() -> None:
    raw = "<BLOCK>text [1, 1, 9, 9]<CHILD>Hello<BLOCK>image [1, 1, 5, 5]"
    page = PageLogprobs((Segment((), ()), Segment((-0.1,) * 3, (-0.2,)), Segment((-0.3,) * 2, ())))
    parsed = parse_page(raw)
    assert segment_of_blocks(raw, page, FLAG_NO_HEADER in parsed.blocks[0].flags) == [1, 2]
    raw = "Intro<BLOCK>text [1, 1, 9, 9]<CHILD>Hello<BLOCK>image [1, 1, 5, 5]"
    assert segment_of_blocks(raw, page, True) == [0, 1, 2]
    assert segment_of_blocks(raw + "<BLOCK>", page, True) == []  # not this text's tokens
