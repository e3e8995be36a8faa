"""The pages of a `PageScheduler` run: what a page in flight holds, its vLLM requests, its result.

A page is one parent request and a fork tree (hpdparse/hpd/fork_tree.py); each branch of the tree
is one vLLM request (`BranchRequest`). Only the requests whose tokens are needed while they decode
get an output every step (``RequestOutputKind.DELTA``): a fork-mode parent (its ``<FORK>``s start
children) and every request of a streamed page. The others (children, plain-mode parents) report
once, when they finish (``FINAL_ONLY``), with all their tokens; so a step costs hpdparse Python
only for the parents and the requests that finished in it, not for every running request.

A page's ``decoding_steps`` are the engine steps in which one of its branches decoded: the union
of its requests' spans. A ``DELTA`` request's span runs from its first to its last step with new
tokens; a ``FINAL_ONLY`` request's ends at the step it finished in and is as long as its number of
token-producing steps: its tokens, or with speculative decoding its verify steps plus the first
(vLLM's per-request draft counts; without them, on vLLM before 0.29, its tokens, an upper bound).
A request decodes every step once it has started (vLLM keeps a running request in every batch
unless it preempts it), so the spans are exact but for preemptions.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from hpdparse.engines.base import PageResult
from hpdparse.engines.vllm.mtp import spec_decode_counts
from hpdparse.hpd.fork_tree import Branch, ForkTree
from hpdparse.hpd.logprobs import PageLogprobs

if TYPE_CHECKING:
    from vllm.inputs.engine import MultiModalInput


@dataclass(frozen=True)
class WaitingLimits:
    """Pull a page only while the requests waiting in vLLM's scheduler hold fewer than
    `max_waiting_tokens` prompt tokens still to compute and no child waits for room, and (when
    set) fewer than `max_waiting` requests wait, queued children included. `waiting` reads
    (requests, tokens) waiting; None for it: no limit but max_in_flight."""

    max_waiting: int | None
    max_waiting_tokens: int | None
    waiting: Callable[[], tuple[int, int]] | None

    def has_room(self, queued_children: int) -> bool:
        if self.waiting is None:
            return True
        requests, tokens = self.waiting()
        if self.max_waiting is not None and requests + queued_children >= self.max_waiting:
            return False
        if self.max_waiting_tokens is None:
            return True
        return queued_children == 0 and tokens < self.max_waiting_tokens


@dataclass
class BranchRequest:
    """One vLLM request: a branch of the page's fork tree (its parent or one of its children)."""

    page: PageInFlight
    branch: Branch
    request_id: str
    every_step: bool  # DELTA outputs every step; else one FINAL_ONLY output at the end
    cached_tokens: int = 0
    drafted_tokens: int = 0
    accepted_tokens: int = 0
    first_step: int = -1  # the span of engine steps it decoded in (see the module docstring)
    last_step: int = -1
    token_steps: int = 0

    def record_steps(self, step: int, new_tokens: int, finished: bool, completion: Any) -> None:
        """Account for one output of the request at engine step `step`."""
        if self.every_step:
            if new_tokens:
                if self.first_step < 0:
                    self.first_step = step
                self.last_step = step
                self.token_steps += 1
        elif finished:
            metrics = getattr(completion, "spec_decode_metrics", None)
            steps = sum(metrics.histogram) + 1 if metrics is not None else new_tokens
            steps = max(1, min(steps, new_tokens)) if new_tokens else 0
            if steps:
                self.first_step, self.last_step = step - steps + 1, step
                self.token_steps = steps
        if finished:
            self.drafted_tokens, self.accepted_tokens = spec_decode_counts(completion)


@dataclass
class PageInFlight:
    key: Any
    number: int
    started: float
    prompt_ids: list[int]
    # The rendered input (token ids, the tiles' mm kwargs, hashes, placeholders) children are
    # made from; the tiles are the same tensor vLLM's requests hold, not a copy.
    rendered: MultiModalInput
    tree: ForkTree
    on_tokens: Callable[[list[int]], None] | None
    max_tokens: int  # per branch
    cancel: threading.Event | None = None
    on_logprobs: Callable[[list[float]], None] | None = None
    requests: list[BranchRequest] = field(default_factory=list)  # parent's, then children's

    def decoding_steps(self) -> int:
        """The engine steps in which one of the page's branches decoded."""
        spans = sorted((r.first_step, r.last_step) for r in self.requests if r.token_steps)
        steps, end = 0, -1
        for first, last in spans:
            if last > end:
                steps += last - max(first, end + 1) + 1
                end = last
        return steps

    def result(self, detokenize: Callable[[list[int]], str], ids: Any) -> PageResult:
        """The page's result; `ids` are the protocol's token ids (cut the log-probabilities into
        blocks)."""
        tree = self.tree
        spliced, values = tree.tokens_and_logprobs()
        parent, *children = self.requests
        stats: dict[str, int | float] = {
            "decoding_steps": self.decoding_steps(),
            "forks": len(tree.children),
            "parent_tokens": len(tree.parent.tokens),
            "child_tokens": sum(len(c.tokens) for c in tree.children),
            "child_prompt_tokens": sum(tree.child_prompt_len(c) for c in tree.children),
            "cached_tokens": sum(c.cached_tokens for c in children),
            "parent_cached_tokens": parent.cached_tokens,
            "truncated_branches": len(tree.truncated),
            "drafted_tokens": sum(r.drafted_tokens for r in self.requests),
            "accepted_tokens": sum(r.accepted_tokens for r in self.requests),
            **tree.answer_stats(),
        }
        return PageResult(
            key=self.key,
            text=detokenize(spliced),
            finish_reason=tree.finish_reason,
            prompt_tokens=len(self.prompt_ids),
            output_tokens=len(spliced),  # stop tokens not counted, as in the torch engine
            seconds=time.perf_counter() - self.started,
            stats=stats,
            logprobs=PageLogprobs.of_ids(spliced, values, ids),
        )


def child_input(page: PageInFlight, prompt: list[int]) -> MultiModalInput:
    """A child's engine input: its prompt with the page's rendered image (no re-encoding)."""
    from vllm.inputs import mm_input

    image = {name: page.rendered[name] for name in ("mm_kwargs", "mm_hashes", "mm_placeholders")}
    return mm_input(prompt_token_ids=prompt, **image)
