"""One `VllmEngine.run`: pages into vLLM, a child request per `<FORK>`, results out.

A page is one parent request and a fork tree (hpdparse/hpd/fork_tree.py). Every ``<FORK>`` the
parent writes becomes a child request added while the parent keeps decoding: its prompt is the
parent's prompt, the parent's tokens before that ``<FORK>`` and ``<CHILD>``, and it carries the
parent's already rendered image input, so the vision encoder does not run again and vLLM's prefix
cache serves the shared KV. Children wait in a queue while `child_limit` of them run, so a page
with hundreds of regions cannot flood vLLM's scheduler; they go in before new pages (they finish
pages) and do not count against `max_in_flight`.

Admission control: a new page is pulled from the (lazy) request iterator only while the requests
waiting in vLLM's scheduler hold less than two steps' prompt tokens and no child is queued
(`pages.WaitingLimits`, `VllmOptions.max_waiting_tokens`); `max_in_flight` stays the upper bound.
Which requests report their tokens every step, and what a step costs here: see ``pages``.

A page's `PageRequest.max_tokens` lowers the token limit of each of its branches; once its
`PageRequest.cancel` is set, the page's requests are aborted between steps and its result is
`cancelled_result`.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Iterable, Iterator
from typing import Any

from hpdparse.engines.base import (
    FINISH_ERROR,
    FINISH_STOP,
    PageRequest,
    PageResult,
    cancelled_result,
    page_token_limit,
)
from hpdparse.engines.vllm.pages import BranchRequest, PageInFlight, child_input
from hpdparse.errors import EngineError
from hpdparse.hpd.fork_tree import Branch, ForkTree


class PageScheduler:
    """The state of one run of a started engine: the pages in flight and their requests, the
    children waiting to be added, and admission control. `results()` is the run. Page numbers
    (request ids ``pageN``, ``pageN.cK``) come from the engine, unique across its runs."""

    def __init__(self, engine: Any, max_in_flight: int) -> None:
        # The started VllmEngine (engine.py, which imports this module, so it is not named
        # here): the run reads its vLLM engine, settings, token ids, prompt, answers from the
        # file, length limit, admission limits and page numbers.
        self._engine = engine
        self._llm = engine.llm_engine  # a started vLLM LLMEngine
        self._forks = engine.config.fork
        self._ids = engine.ids
        self._stop_ids = sorted(self._ids.stop)
        # One <IMG_CONTEXT>: the model's processor widens it to the page's N*256 image tokens.
        self._prompt_ids = engine.prompts.build(1, self._forks)
        self._max_model_len = engine.max_model_len()
        self._max_in_flight = max(1, int(max_in_flight))
        self._child_limit = max(64, 8 * self._max_in_flight)
        self._admission = engine.admission()
        self._requests: dict[str, BranchRequest] = {}  # by id, until their branch finishes
        self._queued_children: deque[BranchRequest] = deque()
        # Pages in flight whose request can be cancelled.
        self._cancellable: dict[int, PageInFlight] = {}
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
                    # Pages in flight but none of their requests in vLLM: a bug, not a wait.
                    if self._pages_in_flight and not self._queued_children:
                        raise EngineError(
                            f"vllm engine: {self._pages_in_flight} pages lost in flight"
                        )
                    if self._exhausted and not self._pages_in_flight:
                        return
                    # Children to add, or nothing in flight and the source said "no request
                    # now" (or a page failed to prepare): ask it again; a live source blocks
                    # until it has one.
                    continue
                yield from self._step()
        finally:
            # A run closed early (or failed): abort its requests left in vLLM, unless the
            # engine was closed first (its requests went with it).
            if self._requests and self._engine.started:
                self._llm.abort_request(list(self._requests))

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

        number = next(self._engine.page_numbers)
        prompt = TokensPrompt(
            prompt_token_ids=list(self._prompt_ids), multi_modal_data={"image": request.payload}
        )
        try:
            rendered = self._llm.renderer.render_cmpl([prompt], skip_mm_cache=True)[0]
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
            self._ids,
            forks=self._forks,
            prompt_len=len(prompt_ids),
            max_model_len=self._max_model_len,
            answer=self._engine.answers(request),
        )
        page = PageInFlight(
            request.key,
            number,
            time.perf_counter(),
            prompt_ids,
            rendered,
            tree,
            request.on_tokens,
            page_token_limit(request, self._engine.config.max_tokens),
            request.cancel,
            request.on_logprobs,
        )
        every_step = self._forks or page.on_tokens is not None  # to see its <FORK>s
        parent = BranchRequest(page, tree.parent, f"page{number}", every_step)
        page.requests.append(parent)
        self._requests[parent.request_id] = parent
        params = self._params(page.max_tokens, budget, every_step)
        self._llm.add_request(parent.request_id, rendered, params)
        self._pages_in_flight += 1
        if page.cancel is not None:
            self._cancellable[number] = page
        return None

    def _params(self, max_tokens: int, budget: int, every_step: bool) -> Any:
        """Greedy sampling of at most `max_tokens`, and no more than `budget` (the room left in
        the context); token ids only, as deltas every step or all at once at the end."""
        from vllm import SamplingParams
        from vllm.sampling_params import RequestOutputKind

        return SamplingParams(
            temperature=0.0,
            max_tokens=max(1, min(max_tokens, budget)),
            stop_token_ids=self._stop_ids,
            output_kind=RequestOutputKind.DELTA if every_step else RequestOutputKind.FINAL_ONLY,
            detokenize=False,
            skip_special_tokens=False,
            # the chosen token's log-probability only (for the confidence scores)
            logprobs=0 if self._engine.options.logprobs else None,
            # kept as flat lists, not a dict and a Logprob object per token (host time per step)
            flat_logprobs=True,
        )

    # -------------------------------------------------------------------------------- children
    def _fork(self, parent: BranchRequest, branch: Branch) -> None:
        """Queue the child request of a new child branch (none for a child born finished)."""
        page = parent.page
        child_id = f"{parent.request_id}.c{branch.index}"
        child = BranchRequest(page, branch, child_id, every_step=page.on_tokens is not None)
        page.requests.append(child)
        if branch.finished:
            # The parent's last allowed token was <FORK>: no room left for this child (vLLM
            # would refuse the request); it stays empty, as in the PyTorch reference.
            return
        self._requests[child.request_id] = child
        self._queued_children.append(child)

    def _add_children(self) -> None:
        """Add queued children to vLLM while fewer than the child limit run."""
        while self._queued_children and self._running_children < self._child_limit:
            child = self._queued_children.popleft()
            page = child.page
            prompt = page.prompt_ids + page.tree.child_prompt(child.branch)
            budget = self._max_model_len - len(prompt)
            params = self._params(page.max_tokens, budget, child.every_step)
            self._llm.add_request(child.request_id, child_input(page, prompt), params)
            self._running_children += 1

    # ------------------------------------------------------------------------------ cancelling
    def _drop_cancelled(self) -> Iterator[PageResult]:
        """Abort the vLLM requests of pages whose request was cancelled; yield their results."""
        for page in [p for p in self._cancellable.values() if p.cancel and p.cancel.is_set()]:
            del self._cancellable[page.number]
            queued = {c.request_id for c in self._queued_children if c.page is page}
            self._queued_children = deque(c for c in self._queued_children if c.page is not page)
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
        """One vLLM step: the new tokens of the requests that report every step and of those
        that finished into their pages' trees; stream the pages that moved, then yield the
        pages it finished."""
        try:
            outputs = self._llm.step()
        except Exception as exc:
            raise EngineError(f"vllm engine failed: {type(exc).__name__}: {exc}") from exc
        self._steps += 1
        finished: list[PageInFlight] = []
        streamed: dict[int, PageInFlight] = {}
        for output in outputs:
            request = self._requests.get(output.request_id)
            if request is None:
                continue
            page = request.page
            if page.on_tokens is not None:
                streamed[page.number] = page
            if self._absorb(request, output):
                finished.append(page)
        for page in streamed.values():  # their newly settled tokens
            page.tree.stream_settled(page.on_tokens, page.on_logprobs)
        for page in finished:
            self._pages_in_flight -= 1
            yield page.result(self._engine.detokenize, self._ids)

    def _absorb(self, request: BranchRequest, output: Any) -> bool:
        """One request's output of a step; True when it finished its page."""
        completion = output.outputs[0]
        new_tokens = completion.token_ids
        finished = output.finished
        request.record_steps(self._steps, len(new_tokens), finished, completion)
        page = request.page
        if output.num_cached_tokens:
            request.cached_tokens = max(request.cached_tokens, output.num_cached_tokens)
        logprobs = chosen_logprobs(new_tokens, completion.logprobs)
        for child in page.tree.absorb(request.branch, new_tokens, logprobs):
            self._fork(request, child)
        if not finished:
            return False
        page.tree.finish(request.branch, completion.finish_reason or FINISH_STOP)
        del self._requests[request.request_id]
        if request.branch.is_child:
            self._running_children -= 1
        if page.tree.done:
            self._cancellable.pop(page.number, None)
        return page.tree.done


def chosen_logprobs(tokens: Any, logprobs: Any) -> list[float] | None:
    """The log-probability of each of `tokens` from a completion's `logprobs` (one entry per
    token, mapping token id -> Logprob: a list of dicts, or vLLM's FlatLogprobs); None when the
    completion has none for them."""
    if logprobs is None or len(logprobs) != len(tokens):
        return None
    if isinstance(getattr(logprobs, "start_indices", None), list):  # FlatLogprobs
        return _chosen_flat(tokens, logprobs)
    try:
        return [float(logprobs[i][token].logprob) for i, token in enumerate(tokens)]
    except (KeyError, IndexError, TypeError):
        return None


def _chosen_flat(tokens: Any, flat: Any) -> list[float] | None:
    """`chosen_logprobs` read from FlatLogprobs' lists (no dict per position). Asked with
    logprobs=0, each position holds one entry, the chosen token's: then the lists line up with
    `tokens` and are read whole; otherwise the chosen token is looked up in each position."""
    ids, values, starts, ends = flat.token_ids, flat.logprobs, flat.start_indices, flat.end_indices
    count = len(tokens)
    if len(ids) == count and starts == list(range(count)) and ids == list(tokens):
        return [float(value) for value in values]
    chosen = []
    for i, token in enumerate(tokens):
        at = next((j for j in range(starts[i], ends[i]) if ids[j] == token), -1)
        if at < 0:
            return None
        chosen.append(float(values[at]))
    return chosen
