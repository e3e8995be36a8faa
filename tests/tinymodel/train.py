"""Train the tiny HPD checkpoint in tests/fixtures/tiny-hpd on the synthetic sample pages.

    python -m tests.tinymodel.train [--out DIR] [--seed 0] [--threads 2]

The model (InternViT, mlp1, Qwen3 decoder, P-MTP head; sizes in tests/tinymodel/layout.py) learns
to write each sample page's ground-truth HPD stream from the page image, in fork mode (the parent
writes block headers and `<FORK>`; each child continues from the parent's prefix with `<CHILD>`) and
in plain mode (`document parsing.`: the whole stream in one branch). A page's fork-mode tree is one
packed sequence: children attend to the prompt and the parent up to their fork, at the parent's
positions, exactly as at decoding time.

Training stops only when greedy decoding, through hpdparse's own decoder, reproduces EVERY page's
stream exactly in fork mode (serial and concurrent, with and without P-MTP) and in plain mode; it
fails loudly otherwise. Deterministic for a given seed and thread count (CPU).
"""

from __future__ import annotations

import argparse
import math
import random
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn.functional as F

from hpdparse.engines.options import EngineConfig
from hpdparse.engines.torch.decoding import HpdDecoder, PageJob
from hpdparse.engines.torch.modeling import HpdModel
from hpdparse.hpd import protocol as P
from hpdparse.hpd.model_config import HpdModelConfig
from hpdparse.hpd.prompt import PromptBuilder, TokenIds
from hpdparse.hpd.tiling import TilingConfig, normalize_torch, tile_image
from hpdparse.sources.open import open_source
from tests.tinymodel import layout
from tests.tinymodel import tokenizer as tiny_tok
from tests.tinymodel.synth import load_ground_truth

REPO = Path(__file__).resolve().parents[2]
SAMPLES = REPO / "samples"
STREAMS = REPO / "tests" / "fixtures" / "streams"
TRAIN_DPIS = (200, 150)  # 200 is the CLI default; 150 makes the model less brittle
MTP_DEPTH = 3
MTP_SAMPLES = 512
IGNORE = -100

README = """# tiny-hpd: a test instrument, not HPD-Parsing

This folder is a tiny checkpoint in the real HPD-Parsing layout (InternVL's original
`internvl_chat` format: config.json with `fork_token_id`/`child_token_id`, InternViT + `mlp1` +
Qwen3 decoder + P-MTP head under `language_model.mtp.*`, a Qwen2-style tokenizer holding every
HPD special token). It exists so that hpdparse's engines can be tested end to end on a machine
without the real 1B model.

It was trained, from scratch, ONLY to reproduce the ground-truth HPD streams of hpdparse's own
synthetic sample pages (`samples/*.pdf`, `samples/scan.png`; streams in
`tests/fixtures/streams/`), in fork and plain mode. On any other image its output is meaningless.
Never present its output as HPD-Parsing's.

Made by `python -m tests.tinymodel.train` (seed {seed}, {threads} CPU threads, {steps} steps,
{seconds:.0f} s on the machine that made it). Sizes: {sizes}.
Checked at the end of training: greedy decoding reproduces every training page exactly in fork
mode (serial and concurrent schedules, with and without P-MTP) and in plain mode, at 200 dpi.
P-MTP acceptance on the training pages: {acceptance:.1%} of drafted tokens.
"""


@dataclass
class PageData:
    name: str
    stream: str
    images: dict[int, torch.Tensor]  # dpi (0 for image files) -> normalised tiles
    num_image_tokens: dict[int, int]


def split_stream(stream: str) -> list[tuple[str, str | None]]:
    """Blocks of a stream: (header after <BLOCK>, content after <CHILD> or None)."""
    if not stream.startswith(P.BLOCK):
        raise ValueError(f"stream does not start with {P.BLOCK}: {stream[:40]!r}")
    blocks = []
    for piece in stream.split(P.BLOCK)[1:]:
        if P.CHILD in piece:
            header, content = piece.split(P.CHILD, 1)
            blocks.append((header, content))
        else:
            blocks.append((piece, None))
    return blocks


@dataclass
class Sequence:
    """One training sequence: ids, positions, the allowed-attention matrix, labels, and for each
    token the index of the token that follows it in its branch (-1 if none)."""

    ids: list[int]
    positions: list[int]
    allowed: torch.Tensor  # (T, T) bool
    labels: list[int]
    next_index: list[int]
    page: int
    image_tokens: int


def encode(tok, text: str) -> list[int]:
    return tok.encode(text, add_special_tokens=False).ids


def fork_sequence(tok, ids: TokenIds, prompt: list[int], stream: str, page: int) -> Sequence:
    parent: list[int] = []
    children: list[tuple[int, list[int]]] = []  # (index of <FORK> in parent, child tokens)
    for header, content in split_stream(stream):
        parent += [ids.block, *encode(tok, header)]
        if content is not None:
            children.append((len(parent), encode(tok, content)))
            parent.append(ids.fork)
    parent.append(ids.im_end)
    trunk = prompt + parent[:-1]
    n_trunk = len(trunk)
    seq_ids = list(trunk)
    positions = list(range(n_trunk))
    labels = [IGNORE] * (len(prompt) - 1) + parent
    next_index = list(range(1, n_trunk)) + [-1]
    spans = []
    for fork_at, child in children:
        q = len(prompt) + fork_at  # position of <FORK>: the child's <CHILD> goes there
        start = len(seq_ids)
        inputs = [ids.child, *child]
        seq_ids += inputs
        positions += [q + j for j in range(len(inputs))]
        labels += [*child, ids.im_end]
        next_index += [start + j + 1 for j in range(len(inputs) - 1)] + [-1]
        spans.append((start, len(inputs), q))
    total = len(seq_ids)
    allowed = torch.zeros(total, total, dtype=torch.bool)
    allowed[:n_trunk, :n_trunk] = torch.ones(n_trunk, n_trunk, dtype=torch.bool).tril()
    for start, n, q in spans:
        allowed[start : start + n, :q] = True
        allowed[start : start + n, start : start + n] = torch.ones(n, n, dtype=torch.bool).tril()
    return Sequence(seq_ids, positions, allowed, labels, next_index, page, 0)


def plain_sequence(tok, ids: TokenIds, prompt: list[int], stream: str, page: int) -> Sequence:
    out = [*encode(tok, stream), ids.im_end]
    seq_ids = prompt + out[:-1]
    n = len(seq_ids)
    labels = [IGNORE] * (len(prompt) - 1) + out
    allowed = torch.ones(n, n, dtype=torch.bool).tril()
    return Sequence(seq_ids, list(range(n)), allowed, labels, list(range(1, n)) + [-1], page, 0)


def render_pages(tiling: TilingConfig) -> list[PageData]:
    truth = load_ground_truth(STREAMS)
    pages = []
    for (stem, number), stream in sorted(truth.items()):
        pdf = SAMPLES / f"{stem}.pdf"
        png = SAMPLES / f"{stem}.png"
        images, counts = {}, {}
        if pdf.is_file():
            with open_source(pdf) as doc:
                for dpi in TRAIN_DPIS:
                    img = doc.rasterize(number, dpi)[0]
                    tiles = tile_image(img, tiling)
                    images[dpi] = normalize_torch(tiles, tiling)
                    counts[dpi] = tiles.shape[0] * tiling.tokens_per_tile
        elif png.is_file():
            with open_source(png) as doc:
                img = doc.rasterize(number, 200)[0]
                tiles = tile_image(img, tiling)
                images[0] = normalize_torch(tiles, tiling)
                counts[0] = tiles.shape[0] * tiling.tokens_per_tile
        else:
            raise SystemExit(f"no sample file for ground truth {stem} page {number}")
        pages.append(PageData(f"{stem}/{number}", stream, images, counts))
    return pages


class Batch:
    """Padded tensors for a list of sequences."""

    def opening_weights(self, count: int, weight: float) -> torch.Tensor:
        """Loss weights: `weight` on the first `count` output tokens of each sequence (the
        image-only decisions: which page this is), 1 on the others, 0 where unlabelled."""
        labelled = self.labels != IGNORE
        w = labelled.float()
        first = labelled.float().argmax(1)
        for i, f in enumerate(first.tolist()):
            w[i, f : f + count] *= weight
        return w

    def __init__(self, seqs: list[Sequence]) -> None:
        t = max(len(s.ids) for s in seqs)
        b = len(seqs)
        self.ids = torch.zeros(b, t, dtype=torch.long)
        self.positions = torch.zeros(b, t, dtype=torch.long)
        self.labels = torch.full((b, t), IGNORE, dtype=torch.long)
        self.next_index = torch.full((b, t), -1, dtype=torch.long)
        allowed = torch.zeros(b, t, t, dtype=torch.bool)
        for i, s in enumerate(seqs):
            n = len(s.ids)
            self.ids[i, :n] = torch.tensor(s.ids)
            self.positions[i, :n] = torch.tensor(s.positions)
            self.labels[i, :n] = torch.tensor(s.labels)
            self.next_index[i, :n] = torch.tensor(s.next_index)
            allowed[i, :n, :n] = s.allowed
            allowed[i, n:, n:] = torch.eye(t - n, dtype=torch.bool)  # padding sees itself
        self.mask = torch.zeros(b, 1, t, t).masked_fill_(~allowed[:, None], torch.finfo().min)
        self.seqs = seqs


def forward_batch(model: HpdModel, batch: Batch, features: list[torch.Tensor], img_id: int):
    embeds = model.embed_tokens(batch.ids)
    rows = []
    for i in range(len(batch.seqs)):
        mask = batch.ids[i] == img_id
        e = embeds[i].clone()
        e[mask] = features[i].to(e.dtype)
        rows.append(e)
    x = torch.stack(rows)
    hidden = model.decoder(
        inputs_embeds=x,
        attention_mask={"full_attention": batch.mask},
        position_ids=batch.positions,
        use_cache=False,
    ).last_hidden_state
    return hidden, model.logits(hidden)


def mtp_loss(model: HpdModel, batch: Batch, hidden: torch.Tensor) -> tuple[torch.Tensor, float]:
    """Recurrent P-MTP loss, trunk and embeddings detached: the draft head learns to predict the
    token after next from (h, embedding of next), MTP_DEPTH steps deep."""
    head_w = model.language_model.lm_head.weight.detach()
    emb_w = model.decoder.embed_tokens.weight.detach()
    labels, nxt = batch.labels, batch.next_index
    b_idx, t_idx = torch.nonzero(labels != IGNORE, as_tuple=True)
    if b_idx.numel() > MTP_SAMPLES:  # a random subset keeps the step cheap
        keep = torch.randperm(b_idx.numel())[:MTP_SAMPLES]
        b_idx, t_idx = b_idx[keep], t_idx[keep]
    h = hidden.detach()[b_idx, t_idx]
    cur_tok = labels[b_idx, t_idx]
    cur_pos = t_idx
    total, count, correct = 0.0, 0, 0
    for _ in range(MTP_DEPTH):
        nxt_pos = nxt[b_idx, cur_pos]
        ok = nxt_pos >= 0
        if not bool(ok.any()):
            break
        b_idx, h, cur_tok, nxt_pos = b_idx[ok], h[ok], cur_tok[ok], nxt_pos[ok]
        target = labels[b_idx, nxt_pos]
        ok2 = target != IGNORE
        b_idx, h, cur_tok, nxt_pos, target = (
            b_idx[ok2],
            h[ok2],
            cur_tok[ok2],
            nxt_pos[ok2],
            target[ok2],
        )
        h = model.mtp(h, F.embedding(cur_tok, emb_w))
        logits = F.linear(h, head_w)
        total = total + F.cross_entropy(logits, target, reduction="sum")
        count += target.numel()
        correct += int((logits.argmax(-1) == target).sum())
        cur_tok, cur_pos = target, nxt_pos
    return total / max(count, 1), correct / max(count, 1)


def margins(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Target logit minus the best other logit, at every labelled position."""
    sel = labels != IGNORE
    lg = logits[sel]
    tgt = labels[sel]
    t = lg.gather(1, tgt[:, None]).squeeze(1)
    other = lg.scatter(1, tgt[:, None], float("-inf")).max(1).values
    return t - other


def describe_worst(batch: Batch, logits, m, pages, tok, key) -> list[str]:
    """Where the margin is negative: page, mode, position, wanted and predicted token."""
    out = []
    sel = torch.nonzero(batch.labels != IGNORE)
    for j in torch.nonzero(m <= 0).flatten().tolist()[:3]:
        b, t = sel[j].tolist()
        s = batch.seqs[b]
        mode = "fork" if P.PROMPT_FORK in tok.decode(s.ids, skip_special_tokens=False) else "plain"
        want = tok.id_to_token(int(batch.labels[b, t]))
        got = tok.id_to_token(int(logits[b, t].argmax()))
        out.append(f"{pages[s.page].name}@{key} {mode} #{t} want {want!r} got {got!r}")
    return out


def verify(model: HpdModel, tok, ids: TokenIds, pb: PromptBuilder, pages: list[PageData]):
    """Greedy decoding on every page at its CLI resolution: returns (failures, acceptance)."""
    failures = []
    drafted = accepted = 0
    with torch.no_grad():
        jobs = {}
        for fork in (True, False):
            jobs[fork] = []
            for i, p in enumerate(pages):
                key = 200 if 200 in p.images else 0
                feats = model.image_features(p.images[key]).reshape(-1, model.config.hidden_size)
                jobs[fork].append(PageJob(i, pb.build(p.num_image_tokens[key], fork), feats))
        runs = [  # name, the decoder's settings, schedule
            ("plain", EngineConfig(fork=False, mtp=False, max_tokens=2000), "concurrent"),
            ("serial", EngineConfig(mtp=False, max_tokens=2000), "serial"),
            ("concurrent", EngineConfig(mtp=False, max_tokens=2000), "concurrent"),
            ("serial+mtp", EngineConfig(max_tokens=2000), "serial"),
            ("concurrent+mtp", EngineConfig(max_tokens=2000), "concurrent"),
        ]
        for name, config, schedule in runs:
            decoder = HpdDecoder(model, ids, config, schedule)
            for p, r in zip(pages, decoder.decode(jobs[config.fork]), strict=True):
                text = tok.decode(r.token_ids, skip_special_tokens=False)
                if text != p.stream:
                    failures.append(f"{name} {p.name}")
                if config.mtp:
                    drafted += r.stats["drafted_tokens"]
                    accepted += r.stats["accepted_tokens"]
    return failures, accepted / max(drafted, 1)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=layout.DEFAULT_OUT)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--max-steps", type=int, default=3000)
    parser.add_argument("--lr", type=float, default=4e-4)
    parser.add_argument("--margin", type=float, default=1.0, help="min logit margin to stop")
    parser.add_argument("--batch", type=int, default=4, help="sequences per step")
    parser.add_argument("--check-every", type=int, default=25)
    parser.add_argument("--decay-steps", type=int, default=2500)
    parser.add_argument("--vision-lr-scale", type=float, default=1.0)
    parser.add_argument("--hinge", choices=("mean", "sum"), default="mean")
    parser.add_argument("--page-probe", type=float, default=3.0, help="auxiliary loss weight")
    parser.add_argument("--opening-tokens", type=int, default=12)
    parser.add_argument("--stop-margin", type=float, default=0.3, help="clean margin to stop")
    parser.add_argument("--opening-weight", type=float, default=100.0)
    args = parser.parse_args(argv)

    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    random.seed(args.seed)
    torch.use_deterministic_algorithms(True)
    t0 = time.time()

    truth = load_ground_truth(STREAMS)
    tok = tiny_tok.train_tokenizer(list(truth.values()), vocab_size=1024)
    config = layout.tiny_config(tok)
    cfg = HpdModelConfig.from_dict(config)
    tiling = TilingConfig.from_model_config(config)
    model = HpdModel(cfg)
    layout.init_weights_randomly(model, args.seed)
    model.train()
    ids = TokenIds(
        img_start=tok.token_to_id(P.IMG_START),
        img_end=tok.token_to_id(P.IMG_END),
        img_context=tok.token_to_id(P.IMG_CONTEXT),
        im_end=tok.token_to_id(P.IM_END),
        fork=tok.token_to_id(P.FORK),
        child=tok.token_to_id(P.CHILD),
        block=tok.token_to_id(P.BLOCK),
        endoftext=tok.token_to_id(P.ENDOFTEXT),
    )
    pb = PromptBuilder(tok, ids, tiny_tok.CHAT_TEMPLATE)
    pages = render_pages(tiling)
    print(f"{len(pages)} pages, vocab {tok.get_vocab_size()}", flush=True)

    # Sequences per (page, image variant): the prompt length depends on the tile count.
    variants: list[tuple[int, int]] = [(i, k) for i, p in enumerate(pages) for k in p.images]
    seqs: dict[tuple[int, int, bool], Sequence] = {}
    for i, k in variants:
        p = pages[i]
        n_img = p.num_image_tokens[k]
        seqs[(i, k, True)] = fork_sequence(tok, ids, pb.build(n_img, True), p.stream, i)
        seqs[(i, k, False)] = plain_sequence(tok, ids, pb.build(n_img, False), p.stream, i)
    print(f"longest sequence {max(len(s.ids) for s in seqs.values())} tokens", flush=True)

    params = [p for n, p in model.named_parameters() if not n.startswith("language_model.mtp.")]
    vision = [p for n, p in model.named_parameters() if n.startswith(("vision_model.", "mlp1."))]
    vision_ids = {id(p) for p in vision}
    groups = [
        {"params": [p for p in params if id(p) not in vision_ids], "scale": 1.0},
        {"params": vision, "scale": args.vision_lr_scale},
    ]
    opt = torch.optim.AdamW(groups, lr=args.lr, weight_decay=0.0, betas=(0.9, 0.98))
    opt_mtp = torch.optim.AdamW(model.mtp.parameters(), lr=args.lr, weight_decay=0.0)
    # Optional auxiliary loss (not part of the checkpoint): a linear probe on the decoder's
    # hidden state where the first block label is chosen must tell the pages apart (pages with
    # the same stream are one class): a direct signal for the image-only decisions.
    streams = sorted({p.stream for p in pages})
    page_class = torch.tensor([streams.index(p.stream) for p in pages])
    probe = None
    if args.page_probe > 0:
        probe = torch.nn.Linear(cfg.hidden_size, len(streams))
        g = torch.Generator().manual_seed(args.seed + 1)
        with torch.no_grad():
            probe.weight.copy_(torch.randn(probe.weight.shape, generator=g) * 0.02)
            probe.bias.zero_()
        opt.add_param_group({"params": list(probe.parameters()), "scale": 1.0})
    rng = random.Random(args.seed)
    # Pages rendered from PDFs have two resolutions, image files one (key 0).
    full_batches = {
        k: Batch([seqs[(i, kk, f)] for i, kk in variants if kk == k for f in (True, False)])
        for k in sorted({k for _, k in variants})
    }
    step = 0
    keys = sorted(seqs)
    for step in range(1, args.max_steps + 1):
        # A few random (page, resolution, mode) sequences per step, with a little pixel noise
        # (robustness to other engines' numerics).
        chosen = rng.sample(keys, args.batch)
        batch = Batch([seqs[c] for c in chosen])
        feats = []
        for i, k, _ in chosen:
            px = pages[i].images[k]
            px = px + 0.02 * torch.randn(px.shape)
            feats.append(model.image_features(px).reshape(-1, cfg.hidden_size))
        # Warm up, then a cosine decay to 10%: memorisation needs small steps at the end.
        warm = min(1.0, step / 30)
        decay = 0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * min(1.0, step / args.decay_steps)))
        for g in opt.param_groups + opt_mtp.param_groups:
            g["lr"] = args.lr * warm * decay * g.get("scale", 1.0)
        hidden, logits = forward_batch(model, batch, feats, ids.img_context)
        flat_logits, flat_labels = logits.flatten(0, 1), batch.labels.flatten()
        if args.opening_weight == 1.0:
            loss = F.cross_entropy(flat_logits, flat_labels, ignore_index=IGNORE)
        else:
            ce = F.cross_entropy(flat_logits, flat_labels, ignore_index=IGNORE, reduction="none")
            weights = batch.opening_weights(args.opening_tokens, args.opening_weight)
            loss = (ce.view(weights.shape) * weights).sum() / weights.sum()
        # A hinge on the logit margin: cross-entropy alone leaves a few rare decisions (fork or
        # plain mode, which page) with a thin or negative margin for a long time.
        hinge = F.relu(2 * args.margin - margins(logits, batch.labels))
        hinge = hinge.mean() if args.hinge == "mean" else hinge.sum() / len(chosen)
        l_mtp, acc_mtp = mtp_loss(model, batch, hidden)
        opt.zero_grad(set_to_none=True)
        opt_mtp.zero_grad(set_to_none=True)
        total = loss + hinge + l_mtp
        if probe is not None:
            # The hidden state that chooses the first block's label must know the page.
            first = (batch.labels != IGNORE).float().argmax(1) + 1
            at_first = hidden[torch.arange(len(chosen)), first]
            target = page_class[torch.tensor([i for i, _, _ in chosen])]
            total = total + args.page_probe * F.cross_entropy(probe(at_first), target)
        total.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        opt_mtp.step()
        if step % 10 == 0:
            with torch.no_grad():
                m = margins(logits.detach(), batch.labels)
            print(
                f"step {step} loss {loss.item():.4f} mtp {l_mtp.item():.3f} acc {acc_mtp:.2f} "
                f"batch min margin {float(m.min()):.2f} {time.time() - t0:.0f}s",
                flush=True,
            )
        if step % args.check_every:
            continue
        # Every variant, without noise: teacher-forced margins, then greedy decoding.
        model.eval()
        with torch.no_grad():
            clean, worst = [], []
            for k, fb in full_batches.items():
                fe = []
                for s in fb.seqs:
                    px = pages[s.page].images[k]
                    fe.append(model.image_features(px).reshape(-1, cfg.hidden_size))
                _, lg = forward_batch(model, fb, fe, ids.img_context)
                m = margins(lg, fb.labels)
                clean.append(round(float(m.min()), 2))
                worst.extend(describe_worst(fb, lg, m, pages, tok, k))
        print(f"step {step}: clean min margins {clean}; worst: {worst[:4]}", flush=True)
        if min(clean) > args.stop_margin and acc_mtp > 0.5:
            failures, acceptance = verify(model, tok, ids, pb, pages)
            print(f"step {step}: greedy check failures {failures} acceptance {acceptance:.2f}")
            if not failures:
                break
        model.train()
    else:
        print(f"FAILED: no exact reproduction after {args.max_steps} steps", file=sys.stderr)
        return 1

    model.eval()
    failures, acceptance = verify(model, tok, ids, pb, pages)
    if failures:
        print(f"FAILED: greedy decoding differs from the ground truth: {failures}", file=sys.stderr)
        return 1
    seconds = time.time() - t0
    v, llm = config["vision_config"], config["llm_config"]
    sizes = (
        f"tile {config['force_image_size']}px, patch {v['patch_size']}, up to "
        f"{config['max_dynamic_patch']} tiles + thumbnail; ViT hidden {v['hidden_size']} x "
        f"{v['num_hidden_layers']} layers; Qwen3 hidden {llm['hidden_size']} x "
        f"{llm['num_hidden_layers']} layers, {llm['num_attention_heads']} heads of "
        f"{llm['head_dim']}, {llm['num_key_value_heads']} kv head(s), vocab {llm['vocab_size']}; "
        f"{sum(p.numel() for p in model.parameters()) / 1e6:.2f}M parameters"
    )
    readme = README.format(
        seed=args.seed,
        threads=args.threads,
        steps=step,
        seconds=seconds,
        sizes=sizes,
        acceptance=acceptance,
    )
    layout.write_checkpoint(model, config, tok, args.out, readme)
    print(
        f"wrote {args.out} after {step} steps, {seconds:.0f} s; P-MTP acceptance {acceptance:.2f}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
