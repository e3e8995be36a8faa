"""Train tests/fixtures/tiny-hpd-reader: tiny-hpd taught to READ random reading pages.

    python -m tests.tinymodel.train_reader [--out DIR] [--seed 0] [--max-minutes 40]

Same architecture, config and tokenizer as tests/fixtures/tiny-hpd (warm-started from its
weights, which know the stream grammar), trained in fork mode on fresh random reading pages
(tests/tinymodel/reading.py) every step, a share of them blurred, noised and JPEG-compressed
(with the clean ground truth as the target, so that the model learns to be unsure of a glyph it
cannot see). The data is unbounded: to get the pages right the model has to read them. An
auxiliary linear probe (not saved) must tell from each tile token what its cell holds, which
teaches the vision side to see the glyphs sooner.

Every `--check-every` steps, greedy decoding through hpdparse's own decoder (fork mode,
concurrent schedule) reads `--holdout` clean pages never used in training; training stops when
at least `--target` of their blocks are exact, or at `--max-minutes` / `--max-steps` (it then
fails unless `--keep-anyway`). The pieces (sequence packing, forward pass, P-MTP loss) are
tests/tinymodel/train.py's. Deterministic for a seed and step count on CPU with one thread.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import sys
import time
from dataclasses import replace
from pathlib import Path

import torch
import torch.nn.functional as F
from PIL import Image, ImageDraw

from hpdparse.engines.options import EngineConfig
from hpdparse.engines.torch.decoding import HpdDecoder, PageJob
from hpdparse.engines.torch.loading import load_model
from hpdparse.engines.torch.modeling import HpdModel
from hpdparse.hpd.checkpoint import open_checkpoint
from hpdparse.hpd.prompt import PromptBuilder, TokenIds, load_tokenizer, token_ids
from hpdparse.hpd.stream import parse_page
from hpdparse.hpd.tiling import TilingConfig, normalize_torch, tile_image
from tests.tinymodel import layout, reading
from tests.tinymodel import tokenizer as tiny_tok
from tests.tinymodel.calibration import Level, degrade
from tests.tinymodel.synth import format_stream
from tests.tinymodel.train import (
    IGNORE,
    Batch,
    Sequence,
    fork_sequence,
    forward_batch,
    mtp_loss,
)

REPO = Path(__file__).resolve().parents[2]
TINY = REPO / "tests" / "fixtures" / "tiny-hpd"
DEFAULT_OUT = REPO / "tests" / "fixtures" / "tiny-hpd-reader"

README = """# tiny-hpd-reader: a test instrument, not HPD-Parsing

A calibration checkpoint for hpdparse's block confidence. It has tiny-hpd's architecture, config
and tokenizer (`tests/fixtures/tiny-hpd`, whose weights it started from), so every engine loads
it unchanged, but it was then trained to READ: on random "reading pages"
(`tests/tinymodel/reading.py`: a square page with 1-{max_blocks} rows of {min_chars}-{max_chars}
random digits in large bold type, one glyph per vision-token cell), fresh pages every step, a
share of them degraded. Unlike tiny-hpd, which recites the seven sample pages it memorised, it
transcribes pages it has never seen, and a glyph it cannot make out becomes a misread digit with
a lower token probability: what `benchmarks/bench_confidence.py` needs to measure confidence.
On any other image its output is meaningless. Never present its output as HPD-Parsing's.

Made by `python -m tests.tinymodel.train_reader --seed {seed} --max-steps {steps}{keep}` ({threads}
CPU thread(s), {steps} steps of {batch} pages, {seconds:.0f} s on the machine that made it; the
same seed and step count give the same weights). Fork mode only (plain mode was not trained).
Checked at the end: greedy decoding in fork mode (concurrent schedule) reads {holdout} clean pages
never seen in training with {accuracy:.1%} of their blocks exact ({pages:.1%} of pages), with
P-MTP too: {mtp_accuracy:.1%}; P-MTP acceptance {acceptance:.1%} of drafted tokens.
"""


class Reader:
    """The model, tokenizer, prompt builder and tiling, and how a page becomes input."""

    def __init__(self, start: Path) -> None:
        ckpt = open_checkpoint(str(start))
        self.config = json.loads((start / "config.json").read_text())
        self.tok = load_tokenizer(ckpt.path, ckpt.model_id)
        self.ids: TokenIds = token_ids(self.tok, ckpt.config, ckpt.model_id)
        self.pb = PromptBuilder(self.tok, self.ids, tiny_tok.CHAT_TEMPLATE)
        self.tiling = TilingConfig.from_model_config(self.config)
        self.model: HpdModel = load_model(ckpt)
        self.token_cells = tile_token_cells(self.tiling)

    def pixels(self, image) -> tuple[torch.Tensor, int]:
        tiles = tile_image(image, self.tiling)
        return normalize_torch(tiles, self.tiling), tiles.shape[0] * self.tiling.tokens_per_tile

    def features(self, pixels: torch.Tensor) -> torch.Tensor:
        return self.model.image_features(pixels).reshape(-1, self.model.config.hidden_size)


def augmented(page: reading.ReadingPage, rng: random.Random, args) -> object:
    """The page image, degraded at a random strength unless drawn clean (`--clean-share`); at
    `--strong` full strength, blur up to `--max-blur` and noise up to `--max-noise`; at
    `--range`, as `range_level` draws it, on a `--glyph-mix` share of pages per glyph cell."""
    if rng.random() < args.clean_share:
        return page.image
    if args.range:
        image = degrade(page.image.convert("RGB"), range_level(rng, args), rng.randrange(1 << 30))
        if rng.random() < args.glyph_mix:
            other = degrade(
                page.image.convert("RGB"), range_level(rng, args), rng.randrange(1 << 30)
            )
            image = Image.composite(other, image, cell_mask(image.size, rng))
        return image
    strength = rng.random()
    if args.strong:
        blur, noise = args.max_blur * strength, args.max_noise * strength * rng.random()
    else:  # the first stage's draws, kept so that its command still gives the same weights
        blur, noise = (
            args.max_blur * strength * rng.random(),
            args.max_noise * strength * rng.random(),
        )
    level = Level("train", blur=blur, noise=noise, jpeg=rng.choice((None, 60, 30, 15, 8)))
    return degrade(page.image.convert("RGB"), level, rng.randrange(1 << 30))


def range_level(rng: random.Random, args) -> Level:
    """A degradation like the calibration levels' (noise about 20 per pixel of blur, hard JPEG)
    at any strength from `--min-blur` up to `--max-blur`, the hard end drawn more often (density
    rising with the blur), so that the model sees every grade between a clear glyph and an
    unreadable one."""
    low = args.min_blur
    blur = low + (args.max_blur - low) * math.sqrt(rng.random())
    noise = 20.0 * blur * rng.uniform(0.75, 1.25)
    jpeg = rng.randint(6, 14) if rng.random() < 0.75 else rng.choice((None, 20, 40))
    return Level("train", blur=blur, noise=noise, jpeg=jpeg)


def cell_mask(size: tuple[int, int], rng: random.Random) -> Image.Image:
    """A mask of about half the page's glyph cells (255 inside them), drawn at random."""
    mask = Image.new("L", size, 0)
    draw = ImageDraw.Draw(mask)
    w, h = size[0] / reading.GRID, size[1] / reading.GRID
    for cell in range(reading.GRID * reading.GRID):
        if rng.random() < 0.5:
            x, y = cell % reading.GRID, cell // reading.GRID
            draw.rectangle(
                (round(x * w), round(y * h), round((x + 1) * w), round((y + 1) * h)), 255
            )
    return mask


def read_pages(r: Reader, pages: list[reading.ReadingPage], mtp: bool) -> tuple[list[str], dict]:
    """Greedy fork-mode decoding of `pages` through hpdparse's decoder: texts and P-MTP stats."""
    jobs = []
    with torch.no_grad():
        for i, page in enumerate(pages):
            px, n = r.pixels(page.image)
            jobs.append(PageJob(i, r.pb.build(n, True), r.features(px)))
        config = EngineConfig(mtp=mtp, max_tokens=400)
        results = HpdDecoder(r.model, r.ids, config).decode(jobs)
    texts = [r.tok.decode(res.token_ids, skip_special_tokens=False) for res in results]
    stats = {"drafted": 0, "accepted": 0}
    for res in results:
        stats["drafted"] += res.stats.get("drafted_tokens", 0)
        stats["accepted"] += res.stats.get("accepted_tokens", 0)
    return texts, stats


def block_accuracy(pages: list[reading.ReadingPage], texts: list[str]) -> tuple[float, float]:
    """Share of ground-truth blocks written exactly (header and content), share of exact pages."""
    exact = total = 0
    for page, text in zip(pages, texts, strict=True):
        written = {(b.label, b.bbox, b.content) for b in parse_page(text).blocks}
        for b in page.blocks:
            total += 1
            exact += (b.label, tuple(b.bbox), b.content) in written
    page_share = sum(p.stream == t for p, t in zip(pages, texts, strict=True)) / len(pages)
    return exact / max(total, 1), page_share


def tile_token_cells(tiling: TilingConfig) -> torch.Tensor:
    """For each image token of the page's tiles (row-major tiles, row-major tokens in a tile,
    the thumbnail left out), the reading page's cell under it (row-major)."""
    side = reading.GRID // reading.TILES  # tokens a tile side
    cells = []
    for tile in range(reading.TILES**2):
        for k in range(tiling.tokens_per_tile):
            row = (tile // reading.TILES) * side + k // side
            cells.append(row * reading.GRID + (tile % reading.TILES) * side + k % side)
    return torch.tensor(cells)


def misplaced_box_sequence(r: Reader, page: reading.ReadingPage, n: int, i: int, rng) -> Sequence:
    """A page whose parent wrote one block's box a cell too long or too short at one end: the
    parent's tokens are not trained on (they are wrong), the children still must write what
    their row holds, so a child reads its row instead of copying as many glyphs as its box says
    (a wrong box then leaves the content right, and a wrong content is a misread glyph)."""
    blocks = list(page.blocks)
    k = rng.randrange(len(blocks))
    x0, y0, x1, y1 = blocks[k].bbox
    step = reading.GRID_STEP
    moves = [(x0 + d, x1) for d in (-step, step)] + [(x0, x1 + d) for d in (-step, step)]
    moves = [(a, b) for a, b in moves if 0 <= a < b <= 1000]
    a, b = rng.choice(moves)
    blocks[k] = replace(blocks[k], bbox=(a, y0, b, y1))
    seq = fork_sequence(r.tok, r.ids, r.pb.build(n, True), format_stream(blocks), i)
    trunk = seq.ids.index(r.ids.child)
    seq.labels[:trunk] = [IGNORE] * trunk
    return seq


def train_step(r: Reader, opts, rng: random.Random, step: int, args) -> tuple[float, ...]:
    """One optimiser step on `args.batch` fresh pages: (loss, P-MTP draft accuracy, probe
    accuracy on glyph cells, teacher-forced content-token accuracy)."""
    opt, opt_mtp, probe = opts
    seqs, feats, cells = [], [], []
    for i in range(args.batch):
        page = reading.reading_page(f"train/{args.seed}/{step}/{i}")
        px, n = r.pixels(augmented(page, rng, args))
        if args.box_noise and rng.random() < args.box_noise:
            seqs.append(misplaced_box_sequence(r, page, n, i, rng))
        else:
            seqs.append(fork_sequence(r.tok, r.ids, r.pb.build(n, True), page.stream, i))
        feats.append(r.features(px))
        cells.append(torch.tensor(reading.cell_classes(page))[r.token_cells])
    batch = Batch(seqs)
    # Warm up, then a cosine decay to 10% over --decay-steps.
    warm = min(1.0, step / 50)
    decay = 0.1 + 0.45 * (1 + math.cos(math.pi * min(1.0, step / args.decay_steps)))
    for g in opt.param_groups + opt_mtp.param_groups:
        g["lr"] = args.lr * warm * decay
    hidden, logits = forward_batch(r.model, batch, feats, r.ids.img_context)
    loss = F.cross_entropy(logits.flatten(0, 1), batch.labels.flatten(), ignore_index=IGNORE)
    l_mtp, acc_mtp = mtp_loss(r.model, batch, hidden)
    # Auxiliary (not in the checkpoint): a linear probe must tell from each tile token what its
    # cell holds, a direct signal to the vision side to see the glyphs.
    tile_feats = torch.cat([f[: len(r.token_cells)] for f in feats])
    target = torch.cat(cells)
    probe_logits = probe(tile_feats)
    l_probe = F.cross_entropy(probe_logits, target)
    inked = target > 0
    probe_acc = float((probe_logits.argmax(-1)[inked] == target[inked]).float().mean())
    opt.zero_grad(set_to_none=True)
    opt_mtp.zero_grad(set_to_none=True)
    (loss + l_mtp + args.probe * l_probe).backward()
    torch.nn.utils.clip_grad_norm_(opt.param_groups[0]["params"], 1.0)
    opt.step()
    opt_mtp.step()
    return loss.item(), acc_mtp, probe_acc, content_accuracy(batch, logits, r.ids.child)


def content_accuracy(batch: Batch, logits: torch.Tensor, child_id: int) -> float:
    """Teacher-forced argmax accuracy on the children's tokens (the content)."""
    hits = total = 0
    for i, s in enumerate(batch.seqs):
        first_child = s.ids.index(child_id)
        labels = batch.labels[i, first_child : len(s.ids)]
        keep = labels != IGNORE
        guess = logits[i, first_child : len(s.ids)].argmax(-1)
        hits += int((guess[keep] == labels[keep]).sum())
        total += int(keep.sum())
    return hits / max(total, 1)


def optimisers(model: HpdModel, lr: float, seed: int):
    trunk = [p for n, p in model.named_parameters() if not n.startswith("language_model.mtp.")]
    probe = torch.nn.Linear(model.config.hidden_size, 1 + len(reading.ALPHABET))
    with torch.no_grad():
        g = torch.Generator().manual_seed(seed + 1)
        probe.weight.copy_(torch.randn(probe.weight.shape, generator=g) * 0.02)
        probe.bias.zero_()
    opt = torch.optim.AdamW(
        [{"params": trunk}, {"params": list(probe.parameters())}],
        lr=lr,
        weight_decay=0.0,
        betas=(0.9, 0.98),
    )
    return opt, torch.optim.AdamW(model.mtp.parameters(), lr=lr, weight_decay=0.0), probe


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument("--start", type=Path, default=TINY, help="checkpoint to warm-start")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--max-steps", type=int, default=5000)
    parser.add_argument("--max-minutes", type=float, default=38.0)
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--decay-steps", type=int, default=3000)
    parser.add_argument("--batch", type=int, default=8, help="pages per step")
    parser.add_argument("--probe", type=float, default=1.0, help="auxiliary loss weight")
    parser.add_argument("--clean-share", type=float, default=0.5)
    parser.add_argument("--max-blur", type=float, default=2.2, help="at the 320 px scale")
    parser.add_argument("--max-noise", type=float, default=80.0)
    parser.add_argument("--min-blur", type=float, default=0.0, help="--range: blur from here")
    parser.add_argument("--strong", action="store_true", help="blur drawn up to --max-blur")
    parser.add_argument("--range", action="store_true", help="degradations as range_level")
    parser.add_argument("--glyph-mix", type=float, default=0.0, help="--range: per-cell share")
    parser.add_argument("--snapshots", type=Path, help="write a checkpoint here every ...")
    parser.add_argument("--snapshot-every", type=int, default=500, help="... this many steps")
    parser.add_argument("--box-noise", type=float, default=0.0, help="share of misplaced boxes")
    parser.add_argument("--min-steps", type=int, default=0, help="no stop before")
    parser.add_argument("--check-every", type=int, default=200)
    parser.add_argument("--holdout", type=int, default=60, help="held-out pages per check")
    parser.add_argument("--target", type=float, default=0.95, help="held-out block accuracy")
    parser.add_argument("--keep-anyway", action="store_true", help="write even below target")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    torch.use_deterministic_algorithms(True)
    rng = random.Random(args.seed)
    t0 = time.time()
    r = Reader(args.start)
    r.model.train()
    opts = optimisers(r.model, args.lr, args.seed)
    holdout = [reading.reading_page(f"holdout/{i}") for i in range(args.holdout)]
    accuracy = 0.0
    step = 0
    for step in range(1, args.max_steps + 1):
        loss, acc_mtp, probe_acc, content_acc = train_step(r, opts, rng, step, args)
        if step % 20 == 0:
            print(
                f"step {step} loss {loss:.4f} mtp acc {acc_mtp:.2f} probe {probe_acc:.2f} "
                f"content {content_acc:.2f} {time.time() - t0:.0f}s",
                flush=True,
            )
        if args.snapshots and step % args.snapshot_every == 0:
            snapshot = args.snapshots / f"step-{step:05d}"
            layout.write_checkpoint(r.model, r.config, r.tok, snapshot, f"# step {step}\n")
            print(f"snapshot {snapshot} {time.time() - t0:.0f}s", flush=True)
        last = step == args.max_steps or time.time() - t0 > args.max_minutes * 60
        if step % args.check_every and not last:
            continue
        r.model.eval()
        accuracy, page_share = block_accuracy(holdout, read_pages(r, holdout, mtp=False)[0])
        r.model.train()
        print(
            f"step {step}: held-out blocks exact {accuracy:.1%}, pages {page_share:.1%}",
            flush=True,
        )
        if (accuracy >= args.target and step >= args.min_steps) or last:
            break
    r.model.eval()
    if accuracy < args.target and not args.keep_anyway:
        print(
            f"FAILED: held-out block accuracy {accuracy:.1%} < {args.target:.0%}", file=sys.stderr
        )
        return 1
    write(r, args, step, time.time() - t0, holdout)
    return 0


def write(r: Reader, args, step: int, seconds: float, holdout) -> None:
    texts, _ = read_pages(r, holdout, mtp=False)
    accuracy, page_share = block_accuracy(holdout, texts)
    mtp_texts, stats = read_pages(r, holdout, mtp=True)
    mtp_accuracy, _ = block_accuracy(holdout, mtp_texts)
    if mtp_texts != texts:
        print("WARNING: P-MTP changed the text of a held-out page", file=sys.stderr)
    readme = README.format(
        max_blocks=reading.MAX_BLOCKS,
        min_chars=reading.MIN_CHARS,
        max_chars=reading.MAX_CHARS,
        seed=args.seed,
        steps=step,
        keep=" --keep-anyway" if accuracy < args.target else "",
        threads=args.threads,
        batch=args.batch,
        seconds=seconds,
        holdout=len(holdout),
        accuracy=accuracy,
        pages=page_share,
        mtp_accuracy=mtp_accuracy,
        acceptance=stats["accepted"] / max(stats["drafted"], 1),
    )
    layout.write_checkpoint(r.model, r.config, r.tok, args.out, readme)
    print(f"wrote {args.out} after {step} steps, {seconds:.0f} s; held-out {accuracy:.1%}")


if __name__ == "__main__":
    sys.exit(main())
