"""The fork tree of a page (hpdparse/hpd/fork_tree.py) on made-up token ids: no model, no engine."""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hpdparse.hpd.fork_tree import Branch, ForkTree
from hpdparse.hpd.protocol import FINISH_LENGTH, FINISH_STOP

FORK, CHILD, END, EOT = 1, 2, 3, 4  # END and EOT: the two stop tokens


@dataclass(frozen=True)
class Ids:
    fork: int = FORK
    child: int = CHILD
    stop: frozenset[int] = frozenset({END, EOT})


def tree(*, forks: bool = True, prompt_len: int = 10, max_model_len: int = 1000) -> ForkTree:
    return ForkTree(Ids(), forks=forks, prompt_len=prompt_len, max_model_len=max_model_len)


def decode(
    page: ForkTree, parent: list[int], children: list[list[int]], parent_finish: str = FINISH_STOP
) -> list[Branch]:
    """The parent's tokens in one go, then each child's, as an engine would report them."""
    born = page.absorb(page.parent, parent)
    page.finish(page.parent, parent_finish)
    assert len(born) == len(children)
    for child, tokens in zip(born, children, strict=True):
        if not child.finished:
            page.absorb(child, tokens)
            page.finish(child, FINISH_STOP)
    return born


def test_a_page_without_forks_is_the_parent_without_its_stop_token() -> None:
    page = tree()
    assert page.absorb(page.parent, [10, 11, 12, END]) == []
    assert not page.done
    page.finish(page.parent, FINISH_STOP)
    assert page.done and page.finish_reason == FINISH_STOP
    assert page.tokens() == [10, 11, 12]
    assert page.branches == [page.parent] and page.children == []


@pytest.mark.parametrize(
    ("parent", "children", "spliced"),
    [
        # first token
        ([FORK, 10, 11, END], [[20, 21, END]], [CHILD, 20, 21, 10, 11]),
        # consecutive forks
        ([10, FORK, FORK, 11, EOT], [[20, END], [30, 31, END]], [10, CHILD, 20, CHILD, 30, 31, 11]),
        # last token (the parent ends on <FORK> by max_tokens)
        ([10, 11, FORK], [[20, 21, END]], [10, 11, CHILD, 20, 21]),
        # every token
        ([FORK, FORK, FORK], [[20, END], [END], [30, END]], [CHILD, 20, CHILD, CHILD, 30]),
    ],
    ids=["first", "consecutive", "last", "every"],
)
def test_forks_in_every_position(parent, children, spliced) -> None:
    page = tree()
    born = decode(page, parent, children, FINISH_LENGTH if parent[-1] == FORK else FINISH_STOP)
    assert [c.index for c in born] == list(range(1, len(children) + 1))
    assert [c.fork_at for c in born] == [i for i, t in enumerate(parent) if t == FORK]
    assert page.done and page.tokens() == spliced
    # A child's prompt: the parent's tokens before its <FORK>, then <CHILD>.
    for child in born:
        assert page.child_prompt(child) == [*parent[: child.fork_at], CHILD]
        assert page.child_prompt_len(child) == 10 + len(page.child_prompt(child))


def test_tokens_without_stop_tokens_as_the_torch_engine_reports_them() -> None:
    page = tree()
    decode(page, [10, FORK, 11], [[20, 21]])
    assert page.tokens() == [10, CHILD, 20, 21, 11]


def test_a_fork_as_the_last_allowed_token_leaves_an_empty_child() -> None:
    # prompt 10 + parent tokens: a child forked at output position `at` needs a prompt of
    # 10 + at + 1 tokens; with a context of 14 a fork at 3 fills it, one at 2 does not.
    page = tree(prompt_len=10, max_model_len=14)
    first, middle, last = page.absorb(page.parent, [10, FORK, FORK, FORK])
    assert (first.fork_at, middle.fork_at) == (1, 2) and not (first.finished or middle.finished)
    assert last.fork_at == 3 and last.finished and last.finish_reason == FINISH_LENGTH
    assert page.child_prompt_len(last) == 14 and last.tokens == []
    page.finish(page.parent, FINISH_LENGTH)
    assert not page.done  # the children with room still decode
    for child in (first, middle):
        page.absorb(child, [20 + child.index, END])
        page.finish(child, FINISH_STOP)
    assert page.done and page.finish_reason == FINISH_LENGTH
    assert page.truncated == [page.parent, last]
    assert page.tokens() == [10, CHILD, 21, CHILD, 22, CHILD]


def test_children_never_fork_and_keep_their_fork_tokens() -> None:
    page = tree()
    (child,) = page.absorb(page.parent, [10, FORK, 11, END])
    page.finish(page.parent, FINISH_STOP)
    assert page.absorb(child, [20, FORK, 21, FORK, END]) == []
    page.finish(child, FINISH_STOP)
    assert page.children == [child]
    assert page.tokens() == [10, CHILD, 20, FORK, 21, FORK, 11]


def test_plain_decoding_keeps_the_parents_fork_tokens_as_text() -> None:
    page = tree(forks=False)
    assert page.absorb(page.parent, [10, FORK, 11, FORK, END]) == []
    page.finish(page.parent, FINISH_STOP)
    assert page.done and page.tokens() == [10, FORK, 11, FORK]
    assert page.take_settled() == [10, FORK, 11, FORK]


def test_truncated_branches_make_the_page_length() -> None:
    page = tree()
    (child,) = page.absorb(page.parent, [10, FORK, 11, END])
    page.finish(page.parent, FINISH_STOP)
    page.absorb(child, [20, 21])
    page.finish(child, FINISH_LENGTH)  # the child ran into max_tokens
    assert page.finish_reason == FINISH_LENGTH and page.truncated == [child]
    assert page.tokens() == [10, CHILD, 20, 21, 11]


@pytest.mark.parametrize("order", list(itertools.permutations(range(3))))
def test_children_finishing_in_any_order(order: tuple[int, ...]) -> None:
    page = tree()
    children = page.absorb(page.parent, [10, FORK, 11, FORK, FORK, 12])
    assert page.take_settled() == [10, CHILD]  # up to the first child, still empty
    page.absorb(page.parent, [13, END])
    page.finish(page.parent, FINISH_STOP)
    for child in children:
        page.absorb(child, [20 + child.index])
    assert page.take_settled() == [21]  # the first child's tokens so far, and no further
    streamed = [10, CHILD, 21]
    for step, k in enumerate(order):
        child = children[k]
        page.absorb(child, [30 + child.index, END])
        page.finish(child, FINISH_STOP)
        assert page.done == (step == len(order) - 1)
        streamed += page.take_settled()
        assert streamed == settled_by_definition(page)
    assert (
        page.tokens() == streamed == [10, CHILD, 21, 31, 11, CHILD, 22, 32, CHILD, 23, 33, 12, 13]
    )
    assert page.take_settled() == []


def test_a_child_that_fails_ends_with_its_tokens_so_far() -> None:
    page = tree()
    failed, ok = page.absorb(page.parent, [10, FORK, FORK, 11, END])
    page.finish(page.parent, FINISH_STOP)
    page.absorb(failed, [20, 21])
    page.finish(failed, "abort")  # vLLM's reason for a request it gave up on
    assert not page.done
    page.absorb(ok, [30, END])
    page.finish(ok, FINISH_STOP)
    assert page.done
    assert page.tokens() == [10, CHILD, 20, 21, CHILD, 30, 11]
    # A failed branch is not a truncated one: the page ends as stop (the engines' behaviour).
    assert page.finish_reason == FINISH_STOP and page.truncated == []


def test_a_finished_branch_takes_no_more_tokens() -> None:
    page = tree()
    page.absorb(page.parent, [10, END])
    page.finish(page.parent, FINISH_STOP)
    with pytest.raises(ValueError, match="finished"):
        page.absorb(page.parent, [11])
    with pytest.raises(ValueError, match="finished twice"):
        page.finish(page.parent, FINISH_STOP)


# ----------------------------------------------------------------- the settled prefix, at random


def settled_by_definition(page: ForkTree) -> list[int]:
    """Walk the parent's tokens; at a <FORK> whose child is unfinished, take <CHILD> and that
    child's tokens so far and stop there."""

    def output(branch: Branch) -> list[int]:
        tokens = branch.tokens
        return tokens[:-1] if tokens and tokens[-1] in Ids.stop else tokens

    out: list[int] = []
    children = iter(page.children)
    for token in output(page.parent):
        if token != FORK:
            out.append(token)
            continue
        child = next(children)
        out += [CHILD, *output(child)]
        if not child.finished:
            break
    return out


plain_tokens = st.integers(min_value=10, max_value=15)


@st.composite
def decoding_runs(draw: st.DrawFn) -> tuple[list[int], list[list[int]], list[int], int]:
    """A parent's tokens, each child's, the order in which branches report (branch indexes, one
    entry per report) and the context length."""
    parent = draw(st.lists(st.one_of(plain_tokens, st.just(FORK)), max_size=12))
    forks = parent.count(FORK)
    children = [
        draw(st.lists(st.one_of(plain_tokens, st.just(FORK)), max_size=5)) for _ in range(forks)
    ]
    reports = [0] * (len(parent) + 1) + [
        k for k, c in enumerate(children, 1) for _ in range(len(c) + 1)
    ]
    order = draw(st.permutations(reports))
    max_model_len = draw(st.integers(min_value=1, max_value=20))
    return parent, children, order, max_model_len


@given(decoding_runs())
def test_the_settled_tokens_stream_the_final_tokens(run) -> None:
    """Branches report one token at a time in any order (a child only after its fork); each
    branch's last report ends it with a stop token. The settled prefix only grows, is always
    what its definition says, and the streamed tokens end up exactly the final tokens."""
    parent, children, order, max_model_len = run
    page = tree(prompt_len=0, max_model_len=max_model_len)
    streams = {0: [*parent, END], **{k: [*c, EOT] for k, c in enumerate(children, 1)}}
    branches = {0: page.parent}
    waiting = list(order)
    streamed: list[int] = []
    while waiting:
        k = next(k for k in waiting if k in branches)  # a child reports once it exists
        waiting.remove(k)
        branch = branches[k]
        if branch.finished:  # born without room: it never reports
            continue
        token = streams[k].pop(0)
        for child in page.absorb(branch, [token]):
            branches[child.index] = child
        if not streams[k]:
            page.finish(branch, FINISH_STOP)
        streamed += page.take_settled()
        assert streamed == settled_by_definition(page)
    assert page.done
    assert streamed == page.tokens()
    assert page.tokens().count(CHILD) == parent.count(FORK)


def test_streamed_tokens_come_with_their_logprobs_a_child_marker_with_its_forks() -> None:
    page = tree()
    (child,) = page.absorb(page.parent, [10, FORK, 11], [-0.1, -0.2, -0.3])
    calls: list[tuple[str, list]] = []

    def on_tokens(ids: list[int]) -> None:
        calls.append(("tokens", ids))

    def on_logprobs(values: list[float]) -> None:
        calls.append(("logprobs", values))

    page.stream_settled(on_tokens, on_logprobs)
    page.absorb(child, [12, EOT], [-0.4, -0.5])
    page.finish(child, FINISH_STOP)
    page.stream_settled(on_tokens, on_logprobs)
    page.stream_settled(on_tokens, on_logprobs)  # nothing new: no call
    assert calls == [
        ("logprobs", [-0.1, -0.2]),
        ("tokens", [10, CHILD]),
        ("logprobs", [-0.4, -0.3]),
        ("tokens", [12, 11]),
    ]
    assert page.tokens_and_logprobs()[1] == [-0.1, -0.2, -0.4, -0.3]


def test_tokens_without_logprobs_stream_without_them() -> None:
    page = tree(forks=False)
    page.absorb(page.parent, [10, 11])  # an engine that reported none
    calls: list[object] = []
    page.stream_settled(calls.append, calls.append)
    assert calls == [[10, 11]]
    page.stream_settled(None, calls.append)  # not streamed: nothing taken
    assert calls == [[10, 11]]
