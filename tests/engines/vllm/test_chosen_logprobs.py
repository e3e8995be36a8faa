"""Reading the chosen tokens' log-probabilities from what vLLM returns: its FlatLogprobs (what
the engine asks for) and the list of dicts (what it returns otherwise) give the same floats."""

from __future__ import annotations

import pytest

pytest.importorskip("vllm")

from vllm.logprobs import FlatLogprobs, Logprob

from hpdparse.engines.vllm.scheduling import chosen_logprobs

POSITIONS = [
    {7: Logprob(-0.25, rank=1)},
    {3: Logprob(-1.5, rank=2), 9: Logprob(-0.125, rank=1)},  # the chosen token is not first
    {4: Logprob(-3.0, rank=5)},
]
TOKENS = [7, 9, 4]


def flat(positions: list) -> FlatLogprobs:
    logprobs = FlatLogprobs()
    logprobs.extend(positions)
    return logprobs


def test_flat_and_dict_logprobs_give_the_chosen_tokens_values() -> None:
    assert chosen_logprobs(TOKENS, POSITIONS) == [-0.25, -0.125, -3.0]
    assert chosen_logprobs(TOKENS, flat(POSITIONS)) == [-0.25, -0.125, -3.0]


def test_one_entry_per_position_is_read_whole_and_checked() -> None:
    # what logprobs=0 gives: the chosen token alone at each position
    positions = [{7: Logprob(-0.25, rank=1)}, {9: Logprob(-0.125, rank=1)}, {4: Logprob(-3.0)}]
    assert chosen_logprobs(TOKENS, flat(positions)) == [-0.25, -0.125, -3.0]
    assert chosen_logprobs([7, 8, 4], flat(positions)) is None  # not the chosen token
    assert chosen_logprobs(TOKENS, flat(positions)[1:]) is None  # a count mismatch
    assert chosen_logprobs(TOKENS[1:], flat(positions)[1:]) == [-0.125, -3.0]  # a DELTA slice


@pytest.mark.parametrize("as_flat", [False, True])
def test_a_token_without_its_entry_or_a_count_mismatch_gives_none(as_flat: bool) -> None:
    wrap = flat if as_flat else list
    assert chosen_logprobs([7, 8, 4], wrap(POSITIONS)) is None
    assert chosen_logprobs(TOKENS[:2], wrap(POSITIONS)) is None
    assert chosen_logprobs(TOKENS, wrap([*POSITIONS[:2], {}])) is None
    assert chosen_logprobs(TOKENS, None) is None
