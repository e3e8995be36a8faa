"""A fork tree with an `answer` (--text-layer prefer): answered children are born finished with
the answer's tokens and are spliced, streamed and scored like decoded ones; on made-up ids."""

from __future__ import annotations

from collections.abc import Sequence

from hpdparse.hpd.fork_tree import ForkTree
from hpdparse.hpd.protocol import FINISH_LENGTH, FINISH_STOP
from tests.hpd.test_fork_tree import CHILD, END, FORK, Ids

TEXT, TABLE = 20, 21  # a header "label" token each: the answer knows text blocks only


def answer(prefix: Sequence[int]) -> list[int] | None:
    """Children of text blocks are answered [70, 71, prefix length]; tables are decoded."""
    return [70, 71, len(prefix)] if prefix[-1] == TEXT else None


def tree(max_model_len: int = 1000) -> ForkTree:
    return ForkTree(Ids(), forks=True, prompt_len=10, max_model_len=max_model_len, answer=answer)


def test_answered_children_are_born_finished_and_spliced() -> None:
    page = tree()
    text, table = page.absorb(page.parent, [TEXT, FORK, TABLE, FORK], [-0.1, -0.2, -0.3, -0.4])
    assert text.finished and text.finish_reason == FINISH_STOP and text.answered
    assert text.tokens == [70, 71, 1] and text.logprobs == [0.0, 0.0, 0.0]
    assert not table.finished and not table.answered
    page.absorb(table, [80, END], [-0.5, -0.6])
    page.finish(table, FINISH_STOP)
    page.absorb(page.parent, [END], [-0.7])
    page.finish(page.parent, FINISH_STOP)
    tokens, logprobs = page.tokens_and_logprobs()
    assert tokens == [TEXT, CHILD, 70, 71, 1, TABLE, CHILD, 80]
    assert logprobs == [-0.1, -0.2, 0.0, 0.0, 0.0, -0.3, -0.4, -0.5]
    assert [c for c in page.children if c.answered] == [text]
    assert page.answer_stats() == {"file_children": 1, "file_tokens": 3}


def test_answered_children_stream_at_once() -> None:
    page = tree()
    page.absorb(page.parent, [TEXT, FORK])
    assert page.take_settled() == [TEXT, CHILD, 70, 71, 1]


def test_a_child_without_room_is_not_answered() -> None:
    page = tree(max_model_len=12)  # prompt 10 + <BLOCK> + <CHILD>: full
    (child,) = page.absorb(page.parent, [TEXT, FORK])
    assert child.finish_reason == FINISH_LENGTH and child.tokens == [] and not child.answered


def test_a_tree_without_answer_has_no_answer_stats() -> None:
    plain = ForkTree(Ids(), forks=True, prompt_len=10, max_model_len=1000)
    (child,) = plain.absorb(plain.parent, [TEXT, FORK])
    assert not child.finished and plain.answer_stats() == {}
