"""One `VllmEngine.run`: pages into vLLM, a child request per `<FORK>`, results out.

A page is one parent request and a fork tree (hpdparse/hpd/fork_tree.py). Every ``<FORK>`` the
parent writes becomes a child request added while the parent keeps decoding: its prompt is the
parent's prompt, the parent's tokens before that ``<FORK>`` and ``<CHILD>``, and it carries the
parent's already rendered image input, so the vision encoder does not run again and vLLM's prefix
cache serves the shared KV. Children wait in a queue while `child_limit` of them run, so a page
with hundreds of regions cannot flood vLLM's scheduler; they go in before new pages (they finish
pages) and do not count against `max_in_flight`.

Admission control: a new page is pulled from the (lazy) request iterator only while vLLM's
scheduler has fewer than `max_waiting` requests waiting, queued children included (see
`VllmOptions.max_waiting`); `max_in_flight` stays the upper bound.

A page's `PageRequest.max_tokens` lowers the token limit of each of its branches; once its
`PageRequest.cancel` is set, the page's requests are aborted between steps and its result is
`cancelled_result`.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from itertools import count
from typing import Any

from hpdparse.engines.base import (
    FINISH_ERROR,
    FINISH_STOP,
    PageRequest,
    PageResult,
    cancelled_result,
    page_token_limit,
)
from hpdparse.engines.vllm.mtp import spec_decode_counts
from hpdparse.errors import EngineError
from hpdparse.hpd.fork_tree import Branch, ForkTokenIds, ForkTree


@dataclass(frozen=True)
class PagePrompt:
    """What every page of a run starts from: the prompt's token ids (one ``<IMG_CONTEXT>``,
    widened by vLLM to the page's image tokens), the protocol's token ids and the stop ids; how
    many forks a page may make (`EngineConfig.fork`) and its default token limit per branch."""

    prompt_ids: list[int]
    token_ids: ForkTokenIds
    stop_ids: list[int]
    forks: bool
    max_tokens: int


@dataclass(frozen=True)
class Admission:
    """Pull a page only while fewer than `max_waiting` requests wait in vLLM's scheduler
    (`waiting` reads that count; None for either: no limit but max_in_flight)."""

    max_waiting: int | None
    waiting: Callable[[], int] | None

    def has_room(self, queued_children: int) -> bool:
        if self.waiting is None or self.max_waiting is None:
            return True
        return self.waiting() + queued_children < self.max_waiting


@dataclass
class _Request:
    """One vLLM request: a branch of the page's fork tree (its parent or one of its children)."""

    page: _Page
    branch: Branch
    request_id: str
    cached_tokens: int = 0
    drafted_tokens: int = 0
    accepted_tokens: int = 0


@dataclass
class _Page:
    key: Any
    number: int
    started: float
    prompt_ids: list[int]
    # The rendered input (token ids, the tiles' mm kwargs, hashes, placeholders) children are
    # made from; the tiles are the same tensor vLLM's requests hold, not a copy.
    rendered: dict[str, Any]
    tree: ForkTree
    on_tokens: Callable[[list[int]], None] | None
    max_tokens: int  # per branch
    cancel: threading.Event | None = None
    requests: list[_Request] = field(default_factory=list)  # the parent's, then the children's
    steps: int = 0
    last_step: int = -1

    def stream(self) -> None:
        """Hand the page's newly settled tokens to its `on_tokens`, if any."""
        if self.on_tokens is not None:
            settled = self.tree.take_settled()
            if settled:
                self.on_tokens(settled)


class PageScheduler:
    """The state of one run of a started engine: the pages in flight and their requests, the
    children waiting to be added, and admission control. `results()` is the run. Page numbers
    (request ids ``pageN``, ``pageN.cK``) come from the engine, unique across its runs."""

    def __init__(
        self,
        llm: Any,
        prompt: PagePrompt,
        *,
        detokenize: Callable[[list[int]], str],
        engine_started: Callable[[], bool],
        max_model_len: int,
        max_in_flight: int,
        admission: Admission,
        page_numbers: count,
    ) -> None:
        self._llm = llm  # a started vLLM LLMEngine
        self._detokenize = detokenize
        self._engine_started = engine_started  # False once the engine was closed
        self._prompt = prompt
        self._max_model_len = max_model_len
        self._max_in_flight = max(1, int(max_in_flight))
        self._child_limit = max(64, 8 * self._max_in_flight)
        self._admission = admission
        self._page_numbers = page_numbers
        self._requests: dict[str, _Request] = {}  # by request id, until their branch finishes
        self._queued_children: deque[tuple[_Request, dict[str, Any], int]] = deque()
        self._cancellable: dict[int, _Page] = {}  # pages in flight whose request can be cancelled
        self._pages_in_flight = 0
        self._running_children = 0
        self._steps = 0
        self._exhausted = False

    def results(self, requests: Iterable[PageRequest]) -> Iterator[PageResult]:
        """Decode the pages `requests` yields; one result per page, in completion order."""
        source = iter(requests)
        try:
            while True:
                # Children first: they finish pages, and they count as waiting for admission.
                self._add_children()
                yield from self._admit_pages(source)
                if self._cancellable:
                    yield from self._drop_cancelled()
                if not self._llm.has_unfinished_requests():
                    if self._queued_children:
                        continue
                    if self._pages_in_flight == 0:
                        if self._exhausted:
                            return
                        # Nothing in flight and the source said "no request now" (or a page
                        # failed to prepare): ask it again; a live source blocks until it has one.
                        continue
                    # Pages in flight but none of their requests in vLLM: a bug, not a wait.
                    raise EngineError(f"vllm engine: {self._pages_in_flight} pages lost in flight")
                yield from self._step()
        finally:
            self._abort_unfinished()

    # ------------------------------------------------------------------------------- pages in
    def _admit_pages(self, source: Iterator[PageRequest | None]) -> Iterator[PageResult]:
        """Pull and submit pages while there is room; yields pages that fail to prepare.
        A None from the source ("no request now") ends this round's pulling.
        Its own frame, so no pulled request (and its payload) outlives the call."""
        while (
            not self._exhausted
            and self._pages_in_flight < self._max_in_flight
            and self._admission.has_room(len(self._queued_children))
        ):
            try:
                request = next(source)
            except StopIteration:
                self._exhausted = True
                return
            if request is None:
                return
            failed = self._submit_page(request)
            del request
            if failed is not None:
                yield failed

    def _submit_page(self, request: PageRequest) -> PageResult | None:
        """Add the page's parent request to vLLM; a page that cannot be is a failed result."""
        from vllm.inputs import TokensPrompt

        number = next(self._page_numbers)
        try:
            rendered = self._llm.renderer.render_cmpl(
                [
                    TokensPrompt(
                        prompt_token_ids=list(self._prompt.prompt_ids),
                        multi_modal_data={"image": request.payload},
                    )
                ],
                skip_mm_cache=True,
            )[0]
        except Exception as exc:  # a bad payload fails its page, not the run
            error = f"cannot prepare page input: {type(exc).__name__}: {exc}"[:300]
            return PageResult(key=request.key, text="", finish_reason=FINISH_ERROR, error=error)
        prompt_ids = list(rendered["prompt_token_ids"])
        budget = self._max_model_len - len(prompt_ids)
        if budget < 1:
            return PageResult(
                key=request.key,
                text="",
                finish_reason=FINISH_ERROR,
                error=f"prompt of {len(prompt_ids)} tokens leaves no room in "
                f"max_model_len {self._max_model_len}",
                prompt_tokens=len(prompt_ids),
            )
        tree = ForkTree(
            self._prompt.token_ids,
            forks=self._prompt.forks,
            prompt_len=len(prompt_ids),
            max_model_len=self._max_model_len,
        )
        started = time.perf_counter()
        page = _Page(
            request.key,
            number,
            started,
            prompt_ids,
            rendered,
            tree,
            request.on_tokens,
            page_token_limit(request, self._prompt.max_tokens),
            request.cancel,
        )
        parent = _Request(page, tree.parent, f"page{number}")
        page.requests.append(parent)
        self._requests[parent.request_id] = parent
        self._llm.add_request(parent.request_id, rendered, self._params(page.max_tokens, budget))
        self._pages_in_flight += 1
        if page.cancel is not None:
            self._cancellable[number] = page
        return None

    def _params(self, max_tokens: int, budget: int) -> Any:
        """Greedy sampling of at most `max_tokens`, and no more than `budget` (the room left in
        the context); token ids only, as deltas."""
        from vllm import SamplingParams
        from vllm.sampling_params import RequestOutputKind

        return SamplingParams(
            temperature=0.0,
            max_tokens=max(1, min(max_tokens, budget)),
            stop_token_ids=self._prompt.stop_ids,
            output_kind=RequestOutputKind.DELTA,
            detokenize=False,
            skip_special_tokens=False,
        )

    # -------------------------------------------------------------------------------- children
    def _fork(self, parent: _Request, branch: Branch) -> None:
        """Queue the child request of a new child branch (none for a child born finished)."""
        page = parent.page
        child = _Request(page, branch, f"{parent.request_id}.c{branch.index}")
        page.requests.append(child)
        if branch.finished:
            # The parent's last allowed token was <FORK>: no room left for this child (vLLM
            # would refuse the request); it stays empty, as in the PyTorch reference.
            return
        self._requests[child.request_id] = child
        prompt = page.prompt_ids + page.tree.child_prompt(branch)
        self._queued_children.append((child, _child_input(page, prompt), len(prompt)))

    def _add_children(self) -> None:
        """Add queued children to vLLM while fewer than the child limit run."""
        while self._queued_children and self._running_children < self._child_limit:
            child, engine_input, prompt_len = self._queued_children.popleft()
            budget = self._max_model_len - prompt_len
            params = self._params(child.page.max_tokens, budget)
            self._llm.add_request(child.request_id, engine_input, params)
            self._running_children += 1

    # ------------------------------------------------------------------------------ cancelling
    def _drop_cancelled(self) -> Iterator[PageResult]:
        """Abort the vLLM requests of pages whose request was cancelled; yield their results."""
        for page in [p for p in self._cancellable.values() if p.cancel and p.cancel.is_set()]:
            del self._cancellable[page.number]
            queued = {c.request_id for c, _, _ in self._queued_children if c.page is page}
            if queued:
                kept = [entry for entry in self._queued_children if entry[0].page is not page]
                self._queued_children.clear()
                self._queued_children.extend(kept)
            own = [r for r in page.requests if r.request_id in self._requests]
            running = [r for r in own if r.request_id not in queued]
            self._running_children -= sum(1 for r in running if r.branch.is_child)
            for request in own:
                del self._requests[request.request_id]
            if running:
                self._llm.abort_request([r.request_id for r in running])
            self._pages_in_flight -= 1
            seconds = time.perf_counter() - page.started
            yield cancelled_result(page.key, len(page.prompt_ids), seconds)

    # ------------------------------------------------------------------------------ decoding
    def _step(self) -> Iterator[PageResult]:
        """One vLLM step: every request's new tokens into its page's tree; stream the pages
        that moved, then yield the pages it finished."""
        try:
            outputs = self._llm.step()
        except Exception as exc:
            raise EngineError(f"vllm engine failed: {type(exc).__name__}: {exc}") from exc
        self._steps += 1
        moved: dict[int, _Page] = {}
        finished: list[_Page] = []
        for output in outputs:
            request = self._requests.get(output.request_id)
            if request is None:
                continue
            page = request.page
            moved[page.number] = page
            if self._absorb(request, output):
                finished.append(page)
        for page in moved.values():
            page.stream()
        for page in finished:
            self._pages_in_flight -= 1
            yield self._result(page)

    def _absorb(self, request: _Request, output: Any) -> bool:
        """One request's output of a step; True when it finished its page."""
        completion = output.outputs[0]
        new_tokens = list(completion.token_ids)
        page = request.page
        if new_tokens and page.last_step != self._steps:
            page.last_step = self._steps
            page.steps += 1
        if output.num_cached_tokens:
            request.cached_tokens = max(request.cached_tokens, output.num_cached_tokens)
        for child in page.tree.absorb(request.branch, new_tokens):
            self._fork(request, child)
        if not output.finished:
            return False
        page.tree.finish(request.branch, completion.finish_reason or FINISH_STOP)
        request.drafted_tokens, request.accepted_tokens = spec_decode_counts(completion)
        del self._requests[request.request_id]
        if request.branch.is_child:
            self._running_children -= 1
        if page.tree.done:
            self._cancellable.pop(page.number, None)
        return page.tree.done

    def _result(self, page: _Page) -> PageResult:
        tree = page.tree
        spliced = tree.tokens()
        parent, *children = page.requests
        stats: dict[str, int | float] = {
            "decoding_steps": page.steps,
            "forks": len(tree.children),
            "parent_tokens": len(tree.parent.tokens),
            "child_tokens": sum(len(c.tokens) for c in tree.children),
            "child_prompt_tokens": sum(tree.child_prompt_len(c) for c in tree.children),
            "cached_tokens": sum(c.cached_tokens for c in children),
            "parent_cached_tokens": parent.cached_tokens,
            "truncated_branches": len(tree.truncated),
            "drafted_tokens": sum(r.drafted_tokens for r in page.requests),
            "accepted_tokens": sum(r.accepted_tokens for r in page.requests),
        }
        return PageResult(
            key=page.key,
            text=self._detokenize(spliced),
            finish_reason=tree.finish_reason,
            prompt_tokens=len(page.prompt_ids),
            output_tokens=len(spliced),  # stop tokens not counted, as in the torch engine
            seconds=time.perf_counter() - page.started,
            stats=stats,
        )

    def _abort_unfinished(self) -> None:
        """A run closed early (or failed): abort its requests left in vLLM, unless the engine
        was closed first (its requests went with it)."""
        if self._requests and self._engine_started():
            self._llm.abort_request(list(self._requests))


def _child_input(page: _Page, prompt: list[int]) -> dict[str, Any]:
    """A child's engine input: its prompt with the page's rendered image (no re-encoding)."""
    from vllm.inputs import mm_input

    rendered = page.rendered
    return mm_input(
        prompt_token_ids=prompt,
        mm_kwargs=rendered["mm_kwargs"],
        mm_hashes=rendered["mm_hashes"],
        mm_placeholders=rendered["mm_placeholders"],
    )
