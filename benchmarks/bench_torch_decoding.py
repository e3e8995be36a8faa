"""Torch HPD decoding on the tiny checkpoint: decoding steps per page and pages/s per schedule.

    .venv/bin/python benchmarks/bench_torch_decoding.py [--model tests/fixtures/tiny-hpd]
        [--threads 1] [--repeat 3] [--device cpu]

For the sample pages (samples/, rendered at 200 dpi): plain, serial fork, concurrent fork and
concurrent fork + P-MTP; decoding steps = batched forward passes of the decoder (prefill
included) a page took part in. Pages are decoded all together in the concurrent schedules and
one at a time in the others. Image encoding is excluded from the timings. Prints, asserts nothing.
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

import torch

from hpdparse.engines.options import EngineConfig
from hpdparse.engines.torch.decoding import HpdDecoder, PageJob
from hpdparse.engines.torch.loading import load_model
from hpdparse.hpd.checkpoint import open_checkpoint
from hpdparse.hpd.prompt import PromptBuilder, load_tokenizer, token_ids
from hpdparse.hpd.tiling import normalize_torch, tile_image
from hpdparse.sources.open import open_source

REPO = Path(__file__).resolve().parents[1]

RUNS = (
    ("plain", EngineConfig(fork=False, mtp=False), "concurrent"),
    ("plain + P-MTP", EngineConfig(fork=False), "concurrent"),
    ("serial fork", EngineConfig(mtp=False), "serial"),
    ("concurrent fork", EngineConfig(mtp=False), "concurrent"),
    ("concurrent fork + P-MTP", EngineConfig(), "concurrent"),
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=str(REPO / "tests" / "fixtures" / "tiny-hpd"))
    parser.add_argument("--samples", type=Path, default=REPO / "samples")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--device", default="cpu")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)

    ckpt = open_checkpoint(args.model)
    model = load_model(ckpt, device=args.device)
    tok = load_tokenizer(ckpt.path, args.model)
    ids = token_ids(tok, ckpt.config, args.model)
    prompts = PromptBuilder(tok, ids, ckpt.chat_template())
    tiling = ckpt.config.tiling
    features = []
    files = sorted(args.samples.glob("*.pdf")) + sorted(args.samples.glob("*.png"))
    with torch.no_grad():
        for path in files:
            with open_source(path) as doc:
                for number in range(1, doc.page_count + 1):
                    tiles = tile_image(doc.rasterize(number, 200)[0], tiling)
                    px = normalize_torch(tiles, tiling, device=args.device)
                    f = model.image_features(px)
                    features.append((f"{path.stem}/{number}", f.reshape(-1, f.shape[-1])))
    print(
        f"{len(features)} pages from {args.samples}, model {args.model}, device {args.device}, "
        f"{args.threads} thread(s), best of {args.repeat}"
    )
    print(
        f"{'schedule':<26}{'steps/page':>11}{'max steps':>10}{'pages/s':>9}"
        f"{'tokens/s':>10}{'accepted':>10}"
    )
    texts = {}
    for name, config, schedule in RUNS:
        jobs = [PageJob(k, prompts.build(f.shape[0], config.fork), f) for k, f in features]
        best = float("inf")
        for _ in range(args.repeat):
            decoder = HpdDecoder(model, ids, config, schedule)
            start = time.perf_counter()
            results = decoder.decode(jobs)
            best = min(best, time.perf_counter() - start)
        steps = [r.stats["decoding_steps"] for r in results]
        tokens = sum(r.stats["parent_tokens"] + r.stats["child_tokens"] for r in results)
        drafted = sum(r.stats["drafted_tokens"] for r in results)
        accepted = sum(r.stats["accepted_tokens"] for r in results)
        rate = f"{accepted / drafted:.1%}" if drafted else "-"
        print(
            f"{name:<26}{statistics.mean(steps):>11.1f}{max(steps):>10}"
            f"{len(jobs) / best:>9.2f}{tokens / best:>10.0f}{rate:>10}"
        )
        texts[name] = [tok.decode(r.token_ids, skip_special_tokens=False) for r in results]
    same = all(t == texts["plain"] for t in texts.values())
    print(f"same text from every schedule: {same}")


if __name__ == "__main__":
    main()
