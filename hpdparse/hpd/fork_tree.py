"""The fork tree of one page: its parent (layout) branch, a child per ``<FORK>``, and the splice.

HPD decodes a page as a tree of depth one. The parent branch decodes from the page prompt; every
``<FORK>`` it writes at (0-based) output position ``at`` starts a child whose prompt is the page
prompt, the parent's tokens before that ``<FORK>`` and ``<CHILD>``. Children decode concurrently
with the parent and never fork: a ``<FORK>`` a child writes stays in its text. The page's output
is the parent's tokens with every ``<FORK>`` replaced by ``<CHILD>`` and that child's tokens, in
fork order, stop tokens removed (``ForkTree.tokens``).

Like vLLM's ``ParentRequest`` (``vllm/v1/engine/parallel_sampling.py``), a ``ForkTree`` is the
bookkeeping only: the engine decodes the branches (vLLM requests, or the PyTorch reference's
branch caches), hands each branch's new tokens to ``absorb`` (which returns the children to
start) and reports each branch's end with ``finish``; the tree knows when the page is done, its
finish reason, its spliced tokens, and the part of them that can no longer change
(``take_settled``, for streaming).

A child whose prompt would fill the model's context (the parent's last allowed token was a
``<FORK>``) is born finished with ``FINISH_LENGTH`` and stays empty: there is no room to decode
it (vLLM refuses a request whose prompt fills ``max_model_len``).

A tree given an `answer` (``--text-layer prefer``: engines/text_layer.py) asks it, for each new
child, for the child's tokens from the parent's tokens before the ``<FORK>``; a child it answers
is born finished with ``FINISH_STOP`` and those tokens (log-probability 0: they are not the
model's), and is never decoded.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from hpdparse.hpd.protocol import FINISH_LENGTH, FINISH_STOP


class ForkTokenIds(Protocol):
    """The protocol token ids a fork tree acts on (``hpd.prompt.TokenIds`` is one)."""

    @property
    def fork(self) -> int: ...

    @property
    def child(self) -> int: ...

    @property
    def stop(self) -> frozenset[int]: ...


@dataclass
class Branch:
    """One decoding branch of a page: the parent (index 0) or its k-th child (index k).

    ``tokens`` are the tokens the branch produced, as the engine reported them (vLLM includes the
    stop token a branch ends on; the tree leaves it out of the spliced output)."""

    index: int
    fork_at: int | None = None  # children: the parent's output position of their <FORK>
    tokens: list[int] = field(default_factory=list)
    finish_reason: str | None = None  # None while decoding
    # The log-probability of each of `tokens` when the engine reports them (same length then).
    logprobs: list[float] = field(default_factory=list)
    answered: bool = False  # a child whose tokens came from the tree's `answer`, not the model

    @property
    def is_child(self) -> bool:
        return self.index > 0

    @property
    def finished(self) -> bool:
        return self.finish_reason is not None


class ForkTree:
    """The branches of one page and their splice; see the module docstring.

    `prompt_len` is the page prompt's length and `max_model_len` the model's context: a child
    forked at output position ``at`` has a prompt of ``prompt_len + at + 1`` tokens. With
    ``forks=False`` (plain decoding) the parent's ``<FORK>`` tokens are text and start nothing.
    """

    def __init__(
        self,
        ids: ForkTokenIds,
        *,
        forks: bool,
        prompt_len: int,
        max_model_len: int,
        answer: Callable[[Sequence[int]], list[int] | None] | None = None,
    ) -> None:
        self._fork_id, self._child_id, self._stop_ids = ids.fork, ids.child, frozenset(ids.stop)
        self._answer = answer
        self.forks = forks
        self.prompt_len = prompt_len
        self.max_model_len = max_model_len
        self.parent = Branch(0)
        self.children: list[Branch] = []
        self._open = 1  # branches not finished
        self._settled = _SpliceCursor()

    # ------------------------------------------------------------------------------ branches
    @property
    def branches(self) -> list[Branch]:
        """The parent, then the children in fork order."""
        return [self.parent, *self.children]

    def child_prompt(self, child: Branch) -> list[int]:
        """What a child's prompt adds to the page prompt: the parent's tokens before its
        ``<FORK>``, then ``<CHILD>``."""
        assert child.fork_at is not None
        return [*self.parent.tokens[: child.fork_at], self._child_id]

    def child_prompt_len(self, child: Branch) -> int:
        """The length of a child's whole prompt (page prompt included)."""
        assert child.fork_at is not None
        return self.prompt_len + child.fork_at + 1

    def absorb(
        self,
        branch: Branch,
        new_tokens: Iterable[int],
        logprobs: Iterable[float] | None = None,
    ) -> list[Branch]:
        """Append a branch's new tokens (and their log-probabilities, when the engine has them);
        return the children its ``<FORK>``s started, in fork order (a child with no room to
        decode is among them, already finished)."""
        if branch.finished:
            raise ValueError(f"branch {branch.index} is finished; it takes no more tokens")
        start = len(branch.tokens)
        branch.tokens.extend(new_tokens)
        if logprobs is not None:
            branch.logprobs.extend(logprobs)
        if branch.is_child or not self.forks:
            return []
        born = []
        for at in range(start, len(branch.tokens)):
            if branch.tokens[at] == self._fork_id:
                born.append(self._add_child(at))
        return born

    def _add_child(self, at: int) -> Branch:
        child = Branch(len(self.children) + 1, fork_at=at)
        self.children.append(child)
        self._open += 1
        if self.child_prompt_len(child) >= self.max_model_len:
            self.finish(child, FINISH_LENGTH)
        elif self._answer is not None:
            tokens = self._answer(self.parent.tokens[:at])
            if tokens is not None:
                child.tokens, child.logprobs = list(tokens), [0.0] * len(tokens)
                child.answered = True
                self.finish(child, FINISH_STOP)
        return child

    def finish(self, branch: Branch, reason: str) -> None:
        """A branch ended: ``FINISH_STOP``, ``FINISH_LENGTH`` or the engine's own reason for a
        branch that failed (vLLM's ``abort``/``error``; such a page ends as ``stop``)."""
        if branch.finished:
            raise ValueError(f"branch {branch.index} finished twice")
        branch.finish_reason = reason
        self._open -= 1

    # --------------------------------------------------------------------------------- page
    @property
    def done(self) -> bool:
        """Every branch has finished: the page's output is final."""
        return self._open == 0

    @property
    def finish_reason(self) -> str:
        """``FINISH_LENGTH`` if any branch ran out of room or tokens, else ``FINISH_STOP``."""
        if any(b.finish_reason == FINISH_LENGTH for b in self.branches):
            return FINISH_LENGTH
        return FINISH_STOP

    def answer_stats(self) -> dict[str, int]:
        """``file_children`` and ``file_tokens`` (children answered and their tokens), for the
        page's statistics; empty when the tree has no `answer`."""
        if self._answer is None:
            return {}
        answered = [c for c in self.children if c.answered]
        return {"file_children": len(answered), "file_tokens": sum(len(c.tokens) for c in answered)}

    @property
    def truncated(self) -> list[Branch]:
        """The branches that ended with ``FINISH_LENGTH``."""
        return [b for b in self.branches if b.finish_reason == FINISH_LENGTH]

    def tokens(self) -> list[int]:
        """The page's spliced tokens: final once `done`; before that, the settled prefix."""
        return self._splice(_SpliceCursor())

    def tokens_and_logprobs(self) -> tuple[list[int], list[float] | None]:
        """`tokens()` and the log-probability of each (a spliced ``<CHILD>`` has its
        ``<FORK>``'s), from one splice; None when some branch's tokens came without them."""
        values: list[float] | None = [] if self._has_logprobs else None
        return self._splice(_SpliceCursor(), values), values

    @property
    def _has_logprobs(self) -> bool:
        return all(len(b.logprobs) == len(b.tokens) for b in self.branches)

    def take_settled(self, logprobs: list[float] | None = None) -> list[int]:
        """The tokens that joined the settled prefix since the last call (and, when `logprobs`
        is a list, their log-probabilities appended to it; none when some branch's tokens came
        without them).

        The settled prefix is the longest prefix of the final spliced tokens that can no longer
        change: the parent's tokens up to the first ``<FORK>`` whose child is still decoding,
        then ``<CHILD>`` and that child's tokens so far. Once the page is done the calls' tokens,
        concatenated, are exactly `tokens()`."""
        return self._splice(self._settled, logprobs if self._has_logprobs else None)

    def stream_settled(
        self,
        on_tokens: Callable[[list[int]], None] | None,
        on_logprobs: Callable[[list[float]], None] | None = None,
    ) -> None:
        """Hand the newly settled tokens to `on_tokens` (PageRequest.on_tokens), after their
        log-probabilities to `on_logprobs` when it is set and the engine reported them."""
        if on_tokens is None:
            return
        values: list[float] = []
        settled = self.take_settled(values if on_logprobs is not None else None)
        if not settled:
            return
        if on_logprobs is not None and len(values) == len(settled):
            on_logprobs(values)
        on_tokens(settled)

    def _splice(self, cursor: _SpliceCursor, logprobs: list[float] | None = None) -> list[int]:
        """Advance `cursor` through the splice as far as it is settled; return what it passed
        (and append the passed tokens' log-probabilities to `logprobs` when given).

        The one splice: `tokens()` runs a fresh cursor through it, `take_settled()` the tree's
        own, so the streamed tokens and the final ones cannot differ."""
        out: list[int] = []
        parent = self.parent.tokens
        while True:
            if cursor.child is not None:
                child = cursor.child
                end = self._output_end(child.tokens)
                out.extend(child.tokens[cursor.child_pos : end])
                if logprobs is not None:
                    logprobs.extend(child.logprobs[cursor.child_pos : end])
                cursor.child_pos = end
                if not child.finished:
                    return out
                cursor.child = None
            end = self._output_end(parent)
            while cursor.parent_pos < end:
                token = parent[cursor.parent_pos]
                if logprobs is not None:
                    logprobs.append(self.parent.logprobs[cursor.parent_pos])
                cursor.parent_pos += 1
                if token == self._fork_id and self.forks:
                    out.append(self._child_id)
                    cursor.child = self.children[cursor.next_child]
                    cursor.next_child += 1
                    cursor.child_pos = 0
                    break
                out.append(token)
            else:
                return out

    def _output_end(self, tokens: Sequence[int]) -> int:
        """Where a branch's output ends: before the stop token vLLM appends when a branch ends
        on one (a stop token can only be a branch's last)."""
        if tokens and tokens[-1] in self._stop_ids:
            return len(tokens) - 1
        return len(tokens)


@dataclass
class _SpliceCursor:
    """How far a walk through the splice has come."""

    parent_pos: int = 0  # the next parent token to take
    next_child: int = 0  # the next child to splice in
    child: Branch | None = None  # the child being spliced in
    child_pos: int = 0  # the next token of `child` to take
