"""Greedy HPD decoding on the PyTorch model: plain, serial fork and concurrent fork, each with
optional P-MTP speculative decoding.

A page is a tree of branches. The parent (layout) branch decodes from the prompt; each `<FORK>` it
emits at position p spawns a child whose cache is the parent's cache up to p (not including the
`<FORK>`) and whose first input is `<CHILD>` at position p. Children decode until a stop token and
never fork. The branches' tokens, the forks and the splice into the page's text (the parent's
tokens with every `<FORK>` replaced by `<CHILD>` and that child's tokens, in fork order) are the
page's `ForkTree` (hpdparse/hpd/fork_tree.py), shared with the vLLM engine.

Schedules (same text by construction, tested):
- `serial`: one branch of a page at a time; a child runs to its end right after its fork.
- `concurrent`: every live branch of every page advances in one batched forward pass per step.

Branch caches (`branch_cache`): a branch keeps a list of segments; a child refers to its
parent's segments up to the fork position (no copy: positions below a branch's length are never
rewritten) plus its own. transformers' attention needs one dense key/value tensor per layer, so
each step gathers the batch's caches into a padded tensor (a copy per step; fine for a reference
implementation).

P-MTP: after each forward pass a branch has the hidden state `h` that produced its next token `t`;
the draft head proposes k tokens from (h, embed(t)) recurrently; the next pass feeds
[t, d1..dk] and keeps the longest prefix of drafts equal to the model's own greedy choices, plus
the model's next token. Output is therefore identical to plain greedy decoding.

A decoding step is one batched forward pass of the decoder (prefill included); per page we count
the passes the page took part in.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from hpdparse.engines.base import FINISH_LENGTH, FINISH_STOP
from hpdparse.engines.options import EngineConfig
from hpdparse.engines.torch.branch_cache import KvSegment, StepCache
from hpdparse.hpd.fork_tree import Branch, ForkTree

SCHEDULES = ("serial", "concurrent")


@dataclass
class PageJob:
    """One page to decode: prompt ids (with the image context tokens) and its image features."""

    key: Hashable
    prompt_ids: list[int]
    image_embeds: torch.Tensor  # (number of <IMG_CONTEXT> tokens, hidden)
    max_tokens: int | None = None  # per branch; None: the EngineConfig's
    # children answered without decoding (--text-layer prefer: engines/text_layer.py)
    answer: Callable[[Sequence[int]], list[int] | None] | None = None
    # For the engine: its PageRequest's callbacks and cancel event, and when the page came in.
    on_tokens: Callable[[list[int]], None] | None = None
    on_logprobs: Callable[[list[float]], None] | None = None
    cancel: threading.Event | None = None
    started: float = field(default_factory=time.monotonic)


@dataclass
class PageDecode:
    """The spliced token ids of a page (stop tokens removed) and its statistics."""

    key: Hashable
    token_ids: list[int]
    finish_reason: str
    prompt_tokens: int
    stats: dict[str, int] = field(default_factory=dict)
    logprobs: list[float] | None = None  # of each of token_ids, from the logits that chose it


class _Branch:
    """A branch's cache and decoding state; its tokens are its fork-tree `node`'s."""

    def __init__(self, page: _Page, node: Branch, prefix: list[tuple[KvSegment, int]]) -> None:
        self.page = page
        self.node = node
        self.prefix = prefix  # shared (segment, used length) pairs, read only
        self.own: KvSegment | None = None
        self.length = sum(n for _, n in prefix)  # cache length = position of the next input
        self.pending: int | None = None  # produced, not yet fed
        self.hidden: torch.Tensor | None = None  # hidden state that produced `pending`

    def segments(self) -> list[tuple[KvSegment, int]]:
        own = [(self.own, self.own.n)] if self.own is not None and self.own.n else []
        return self.prefix + own

    def prefix_until(self, position: int) -> list[tuple[KvSegment, int]]:
        """The cache of positions [0, position), as shared segments."""
        out, left = [], position
        for seg, n in self.segments():
            if left <= 0:
                break
            out.append((seg, min(n, left)))
            left -= n
        return out


class _Page:
    def __init__(self, job: PageJob, ids: Any, config: EngineConfig) -> None:
        self.job = job
        self.tree = ForkTree(
            ids,
            forks=config.fork,
            prompt_len=len(job.prompt_ids),
            max_model_len=config.max_model_len,
            answer=job.answer,
        )
        self.parent = _Branch(self, self.tree.parent, [])
        self.children: list[_Branch] = []  # in fork order; children born finished have none
        self.prefilled = False
        self.steps = 0
        self.drafted = 0
        self.accepted = 0

    @property
    def done(self) -> bool:
        return self.tree.done


class HpdDecoder:
    """Decodes pages on an HpdModel with the given token ids (see prompt.TokenIds)."""

    def __init__(
        self, model: Any, ids: Any, config: EngineConfig, schedule: str = "concurrent"
    ) -> None:
        if schedule not in SCHEDULES:
            raise ValueError(f"schedule must be one of {SCHEDULES}, got {schedule!r}")
        if config.speculative_tokens < 0 or config.max_tokens < 1:
            raise ValueError("speculative_tokens must be >= 0 and max_tokens >= 1")
        self.model = model
        self.ids = ids
        self.config = config  # fork, mtp, speculative_tokens, max_tokens, max_model_len
        self.mtp = config.mtp and model.has_mtp
        # Serial (or plain): one branch per page at a time; concurrent: every live branch.
        self.concurrent = config.fork and schedule == "concurrent"
        cfg = model.language_model.config
        self.num_layers = cfg.num_hidden_layers
        self.kv_heads = cfg.num_key_value_heads
        self.head_dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads
        param = next(model.parameters())
        self.device, self.dtype = param.device, param.dtype

    # ------------------------------------------------------------------ public

    def decode(self, jobs: Sequence[PageJob]) -> list[PageDecode]:
        """Decode all pages together (concurrent) or one after the other (serial, plain)."""
        out = []
        for group in [list(jobs)] if self.concurrent else [[job] for job in jobs]:
            pages = [self.new_page(j) for j in group]
            while not all(p.done for p in pages):
                self.step(pages)
            out += [self.result(p) for p in pages]
        return out

    def new_page(self, job: PageJob) -> _Page:
        return _Page(job, self.ids, self.config)

    @torch.inference_mode()
    def step(self, pages: Sequence[_Page]) -> None:
        """One batched forward pass: the prefill of pages not yet prefilled, or else one decoding
        step of every runnable branch of the other pages."""
        fresh = [p for p in pages if not p.prefilled and not p.done]
        if fresh:
            self._prefill(fresh)
            return
        branches = [b for p in pages if not p.done for b in self._runnable(p)]
        if branches:
            self._advance(branches)

    def result(self, page: _Page) -> PageDecode:
        tree = page.tree
        token_ids, logprobs = tree.tokens_and_logprobs()
        return PageDecode(
            key=page.job.key,
            token_ids=token_ids,
            logprobs=logprobs,
            finish_reason=tree.finish_reason,
            prompt_tokens=len(page.job.prompt_ids),
            stats={
                "parent_tokens": len(tree.parent.tokens),
                "child_tokens": sum(len(c.tokens) for c in tree.children),
                "forks": len(tree.children),
                "decoding_steps": page.steps,
                "drafted_tokens": page.drafted,
                "accepted_tokens": page.accepted,
                **tree.answer_stats(),
            },
        )

    # ------------------------------------------------------------------ internals

    def _runnable(self, page: _Page) -> list[_Branch]:
        if self.concurrent:
            return [b for b in (page.parent, *page.children) if not b.node.finished]
        # Serial: the oldest unfinished child first, else the parent.
        return [b for b in (*page.children, page.parent) if not b.node.finished][:1]

    def _prefill(self, pages: list[_Page]) -> None:
        embeds = []
        for p in pages:
            ids = torch.tensor(p.job.prompt_ids, device=self.device)
            e = self.model.embed_tokens(ids)
            mask = ids == self.ids.img_context
            img = p.job.image_embeds.to(device=self.device, dtype=e.dtype)
            if int(mask.sum()) != img.shape[0]:
                raise ValueError(
                    f"prompt has {int(mask.sum())} image tokens, image gives {img.shape[0]}"
                )
            e = e.clone()
            e[mask] = img
            embeds.append(e)
        self._decode([p.parent for p in pages], embeds, [[] for _ in pages])

    def _advance(self, branches: list[_Branch]) -> None:
        drafting = [b for b in branches if self.mtp and b.hidden is not None]
        proposed = self._draft(drafting) if drafting else {}
        drafts = [proposed.get(id(b), []) for b in branches]
        embeds = []
        for b, d in zip(branches, drafts, strict=True):
            if b.pending is None:  # a fresh child: its first input is <CHILD>
                b.pending = self.ids.child
            embeds.append(
                self.model.embed_tokens(torch.tensor([b.pending, *d], device=self.device))
            )
        self._decode(branches, embeds, drafts)

    def _decode(
        self, branches: list[_Branch], embeds: list[torch.Tensor], drafts: list[list[int]]
    ) -> None:
        """One forward pass over the branches' inputs (a prompt, or the pending token and its
        drafts), then what each branch produced: the drafts the model agrees with and its own
        next token, from the logits of the last len(drafts) + 1 positions."""
        hidden = self._forward(branches, embeds, [len(e) for e in embeds])
        for page in {id(b.page): b.page for b in branches}.values():
            page.steps += 1
            page.prefilled = True  # its first pass is its prefill
        for b, d, h in zip(branches, drafts, hidden, strict=True):
            n = len(d) + 1
            greedy, logprobs = _chosen(self.model.logits(h[-n:]))
            accepted = 0
            while accepted < len(d) and d[accepted] == greedy[accepted]:
                accepted += 1
            b.page.drafted += len(d)
            b.page.accepted += accepted
            self._keep(b, len(h) - len(d) + accepted)
            b.pending = None
            # Produce the accepted drafts then the model's own next token, stopping early if
            # the branch ends (stop token or limit) on the way; greedy[accepted] is fed at
            # position b.length.
            for i in range(accepted + 1):
                if b.node.finished:
                    break
                b.hidden = h[len(h) - n + i]
                self._produce(b, greedy[i], logprobs[i], b.length - accepted + i)

    def _draft(self, branches: list[_Branch]) -> dict[int, list[int]]:
        config = self.config
        budgets = []
        for b in branches:
            room = min(
                self._max_tokens(b) - len(b.node.tokens), config.max_model_len - b.length - 1
            )
            budgets.append(max(0, min(config.speculative_tokens, room - 1)))
        k = max(budgets, default=0)
        if k == 0:
            return {}
        h = torch.stack([b.hidden for b in branches])
        tok = torch.tensor([b.pending for b in branches], device=self.device)
        out = []
        for _ in range(k):
            h = self.model.mtp(h, self.model.embed_tokens(tok))
            tok = self.model.logits(h).argmax(-1)
            out.append(tok)
        table = torch.stack(out, dim=1).tolist()
        return {id(b): table[i][: budgets[i]] for i, b in enumerate(branches)}

    def _produce(self, b: _Branch, token: int, logprob: float, position: int) -> None:
        """Record a token the branch produced (and its log-probability); `position` is where it
        will be fed."""
        tree = b.page.tree
        if token in self.ids.stop:
            tree.finish(b.node, FINISH_STOP)
            return
        # A <FORK> of the parent starts a child (born finished, and without a cache, when its
        # <CHILD> would fill the last position: the tree knows the prompt and the context).
        for child in tree.absorb(b.node, [token], [logprob]):
            if not child.finished:
                b.page.children.append(_Branch(b.page, child, b.prefix_until(position)))
        if len(b.node.tokens) >= self._max_tokens(b) or position + 1 >= self.config.max_model_len:
            tree.finish(b.node, FINISH_LENGTH)
            return
        b.pending = token

    def _max_tokens(self, b: _Branch) -> int:
        return b.page.job.max_tokens or self.config.max_tokens

    def _keep(self, b: _Branch, n: int) -> None:
        """Append the first n new cache entries of the last forward pass to the branch."""
        ks = [k[:, :n] for k in b._new_k]
        vs = [v[:, :n] for v in b._new_v]
        if b.own is None:
            b.own = KvSegment(ks, capacity=max(64, 2 * n))
        b.own.append(ks, vs)
        b.length += n
        del b._new_k, b._new_v

    def _forward(
        self, branches: list[_Branch], embeds: list[torch.Tensor], lengths: list[int]
    ) -> list[torch.Tensor]:
        """One forward pass of the decoder over the batch; returns per-branch hidden states
        (n_b, hidden) after the final norm. New cache entries are parked on each branch."""
        bsz = len(branches)
        past_lens = [b.length for b in branches]
        lmax, nmax = max(past_lens), max(lengths)
        hidden = embeds[0].shape[-1]
        dev, dt = self.device, self.dtype
        past_k = [
            torch.zeros(bsz, self.kv_heads, lmax, self.head_dim, device=dev, dtype=dt)
            for _ in range(self.num_layers)
        ]
        past_v = [torch.zeros_like(t) for t in past_k]
        for i, b in enumerate(branches):
            start = lmax - past_lens[i]
            for seg, n in b.segments():
                for layer in range(self.num_layers):
                    past_k[layer][i, :, start : start + n] = seg.k[layer][:, :n]
                    past_v[layer][i, :, start : start + n] = seg.v[layer][:, :n]
                start += n
        x = torch.zeros(bsz, nmax, hidden, device=dev, dtype=dt)
        positions = torch.zeros(bsz, nmax, dtype=torch.long, device=dev)
        allowed = torch.zeros(bsz, nmax, lmax + nmax, dtype=torch.bool, device=dev)
        causal = torch.ones(nmax, nmax, dtype=torch.bool, device=dev).tril()
        for i, (e, n) in enumerate(zip(embeds, lengths, strict=True)):
            x[i, :n] = e
            positions[i] = past_lens[i] + torch.arange(nmax, device=dev)
            allowed[i, :n, lmax - past_lens[i] : lmax] = True
            allowed[i, :, lmax:] = causal
            allowed[i, :n, lmax + n :] = False
        mask = torch.zeros(allowed.shape, dtype=dt, device=dev)
        mask.masked_fill_(~allowed, torch.finfo(dt).min)
        cache = StepCache(past_k, past_v)
        out = self.model.decoder(
            inputs_embeds=x,
            attention_mask={"full_attention": mask[:, None]},
            position_ids=positions,
            past_key_values=cache,
            use_cache=True,
        ).last_hidden_state
        for i, b in enumerate(branches):
            b._new_k = [k[i] for k in cache.new_k]
            b._new_v = [v[i] for v in cache.new_v]
        return [out[i, : lengths[i]] for i in range(bsz)]


def _chosen(logits: torch.Tensor) -> tuple[list[int], list[float]]:
    """The greedy token of each row of `logits` and its log-probability (in float32: the same
    figure whatever the model's dtype rounds the logits to)."""
    tokens = logits.argmax(-1)
    logprobs = torch.log_softmax(logits.float(), dim=-1).gather(-1, tokens[:, None])[:, 0]
    return tokens.tolist(), logprobs.tolist()
