"""vLLM engine throughput on the tiny checkpoint: fork vs plain (--no-fork) at several batch sizes.

    .venv/bin/python benchmarks/bench_vllm.py [--model tests/fixtures/tiny-hpd] [--pages 64]
        [--batch-sizes 1,16,64] [--max-tokens 400] [--instrument hpd-like|forking]

Prints engine start-up time, then per mode and batch size: pages/s, output tokens/s, decoding
steps per page (engine steps in which the page produced a token), forks per page and the share of
child prompt tokens served from the prefix cache. Same pages (the samples, rendered at --dpi and
repeated up to --pages) for every row. --instrument rewires a copy of the checkpoint into a
deterministic writer of HPD-shaped pages (see write_hpd_like_checkpoint), for when the fixture's
own weights do not fork. Asserts nothing.
"""

from __future__ import annotations

import argparse
import itertools
import os
import resource
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from hpdparse.engines.base import EngineConfig, PageRequest  # noqa: E402
from hpdparse.engines.vllm.engine import VllmEngine  # noqa: E402
from hpdparse.engines.vllm.options import VllmOptions  # noqa: E402


def write_hpd_like_checkpoint(source: Path, out: Path, run: int = 40) -> Path:
    """Rewire a copy of `source` into an instrument that writes HPD-shaped pages.

    Layout cycle ``<BLOCK> a1..a5 X b1 b2``, content ``c1..c{run}``. With the fork prompt X is
    ``<FORK>`` and each child writes ``<CHILD> c1..c{run}`` and stops; with the plain prompt the
    content is written inline (X = c1 ... c{run}, then b1). Every branch loops until max_tokens, so
    both modes produce the same kind of text and differ only in how it is scheduled.

    How: decoder MLPs and all attention but layer 0's are zeroed, so a logit depends on the last
    token, except for one signal: layer 0 attends uniformly (zero queries) and reads embedding
    dimension 0, which is +1 on a token only the fork prompt has and -1/2 spread over
    ``<|im_start|>``: its mean over the context is positive with the fork prompt, negative with
    the plain one, and it breaks the tie between the two successors of a5 and of c{run}.
    """
    import shutil

    import torch
    from safetensors.torch import load_file, save_file

    from hpdparse.hpd.checkpoint import open_checkpoint
    from hpdparse.hpd.prompt import PromptBuilder, load_tokenizer, token_ids

    shutil.copytree(source, out)
    ckpt = open_checkpoint(str(out))
    tokenizer = load_tokenizer(ckpt.path, str(out))
    ids = token_ids(tokenizer, ckpt.config, str(out))
    builder = PromptBuilder(tokenizer, ids, ckpt.chat_template())
    fork_prompt, plain_prompt = builder.build(1, True), builder.build(1, False)
    fork_only = [t for t in fork_prompt if t not in plain_prompt and fork_prompt.count(t) == 1]
    im_start = tokenizer.token_to_id("<|im_start|>")
    assert fork_only and fork_prompt[-1] == plain_prompt[-1]
    assert fork_prompt.count(im_start) == plain_prompt.count(im_start) > 0

    w = load_file(str(out / "model.safetensors"))
    embed_key = "language_model.model.embed_tokens.weight"
    vocab, hidden = w[embed_key].shape
    generator = torch.Generator().manual_seed(0)
    embed = torch.randn(vocab, hidden, generator=generator)
    special = {ids.block, ids.fork, ids.child, ids.img_context, ids.img_start, ids.img_end}
    special |= set(ids.stop) | {im_start, *fork_prompt, *plain_prompt}
    free = [t for t in range(vocab) if t not in special]
    a, b, c = free[:5], free[5:7], free[7 : 7 + run]
    chain_tokens = sorted({fork_prompt[-1], ids.block, ids.fork, ids.child, *a, *b, *c})
    # Orthogonal embeddings for the tokens of the chains: a logit then depends on the last token
    # alone, ties are exact, and the mode signal decides them.
    basis, _ = torch.linalg.qr(torch.randn(hidden - 2, len(chain_tokens), generator=generator))
    embed[chain_tokens, 2:] = basis.T * hidden**0.5
    embed[:, :2] = 0.0  # dim 0 carries the mode signal, dim 1 the attention's answer
    unit = embed / embed.norm(dim=1, keepdim=True)
    embed[fork_only[0], 0] = 1.0
    embed[im_start, 0] = -0.5 / fork_prompt.count(im_start)
    w[embed_key] = embed
    # Image embeddings must not touch dims 0 and 1 either.
    w["mlp1.3.weight"][:2] = 0.0
    w["mlp1.3.bias"][:2] = 0.0
    prefix = "language_model.model."
    for name in list(w):
        if name.startswith(prefix + "layers.") and name.endswith(
            ("o_proj.weight", "down_proj.weight", "q_proj.weight")
        ):
            w[name] = torch.zeros_like(w[name])
        if name.endswith("norm.weight") and name.startswith(prefix):
            w[name] = torch.ones_like(w[name])
    w[prefix + "layers.0.self_attn.v_proj.weight"].zero_()
    w[prefix + "layers.0.self_attn.v_proj.weight"][0, 0] = 1.0
    w[prefix + "layers.0.self_attn.o_proj.weight"][1, 0] = 100.0

    head = torch.zeros(vocab, hidden)
    links = [
        [fork_prompt[-1], ids.block, *a, ids.fork, *b, ids.block],
        [a[-1], c[0]],
        [ids.child, *c, ids.im_end],
        [c[-1], b[0]],
    ]
    for chain in links:
        for x, y in itertools.pairwise(chain):
            head[y] += 4.0 * unit[x] * hidden**0.5
    # The mode signal (dim 1) breaks the two ties: fork -> <FORK> and a child's stop; plain ->
    # content inline and back to the layout.
    for token, sign in ((ids.fork, 1), (c[0], -1), (ids.im_end, 1), (b[0], -1)):
        head[token, 1] += 40.0 * sign
    w["language_model.lm_head.weight"] = head
    save_file({k: v.contiguous() for k, v in w.items()}, str(out / "model.safetensors"))
    return out


def sample_images(dpi: int, count: int | None = None) -> list:
    """The sample pages rendered at `dpi`: all of them, or `count` cycling through them."""
    import pymupdf
    from PIL import Image

    images = []
    for pdf in sorted((REPO / "samples").glob("*.pdf")):
        with pymupdf.open(pdf) as doc:
            for page in doc:
                pix = page.get_pixmap(dpi=dpi)
                images.append(Image.frombytes("RGB", (pix.width, pix.height), pix.samples))
    for png in sorted((REPO / "samples").glob("*.png")):
        images.append(Image.open(png).convert("RGB"))
    if count is None:
        return images
    return [images[i % len(images)] for i in range(count)]


def timed_run(engine: VllmEngine, payloads: list, batch: int) -> tuple[list, dict[str, float]]:
    """Decode all payloads at `batch` pages in flight; the results and the common figures."""
    requests = (PageRequest(i, p) for i, p in enumerate(payloads))
    began = time.perf_counter()
    results = list(engine.run(requests, batch))
    seconds = time.perf_counter() - began
    n = len(results)
    tokens = sum(r.output_tokens for r in results)
    steps = sum(r.stats.get("decoding_steps", 0) for r in results)  # a failed page has none
    return results, {
        "pages/s": n / seconds,
        "tokens/s": tokens / seconds,
        "steps/page": steps / n,
        "tokens/page": tokens / n,
        "tokens/step": tokens / max(1, steps),
        "forks/page": sum(r.stats.get("forks", 0) for r in results) / n,
        "seconds": seconds,
    }


def bench(engine: VllmEngine, payloads: list, batch: int) -> dict[str, float]:
    """timed_run's figures plus the children's prefix-cache hit rate."""
    results, figures = timed_run(engine, payloads, batch)
    child_prompt = sum(r.stats["child_prompt_tokens"] for r in results)
    cached = sum(r.stats["cached_tokens"] for r in results)
    figures["cache hit"] = cached / child_prompt if child_prompt else 0.0
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=str(REPO / "tests" / "fixtures" / "tiny-hpd"))
    parser.add_argument("--pages", type=int, default=64)
    parser.add_argument("--batch-sizes", default="1,16,64")
    parser.add_argument("--max-tokens", type=int, default=400)
    parser.add_argument("--dpi", type=int, default=72)
    parser.add_argument("--dtype", default=None, help="default: the engine's (float32 on CPU)")
    parser.add_argument(
        "--instrument",
        choices=["hpd-like", "forking"],
        help="rewire --model: hpd-like (layout in the parent, content in children or inline) or "
        "forking (the test suite's chain that forks every 47 tokens)",
    )
    args = parser.parse_args()
    os.environ.setdefault("OMP_NUM_THREADS", "1")

    model = Path(args.model)
    tmp = None
    if args.instrument:
        tmp = tempfile.TemporaryDirectory()
        if args.instrument == "forking":
            from tests.helpers.vllm import write_forking_checkpoint

            model = write_forking_checkpoint(Path(tmp.name) / "ckpt")
        else:
            model = write_hpd_like_checkpoint(model, Path(tmp.name) / "ckpt")
    batch_sizes = [int(b) for b in args.batch_sizes.split(",")]
    what = f" ({args.instrument} instrument)" if args.instrument else ""
    images = sample_images(args.dpi, args.pages)
    print(
        f"model {args.model}{what}, {len(images)} pages, "
        f"max_tokens {args.max_tokens}, {args.dpi} dpi, dtype {args.dtype}"
    )
    header = f"{'mode':6} {'batch':>5} {'pages/s':>8} {'tok/s':>8} {'steps/pg':>9} "
    header += f"{'tok/pg':>7} {'tok/step':>8} {'forks/pg':>8} {'cache':>6}"
    for fork in (False, True):
        config = EngineConfig(
            model=str(model),
            fork=fork,
            mtp=False,  # P-MTP: benchmarks/bench_vllm_mtp.py
            dtype=args.dtype,
            max_tokens=args.max_tokens,
            max_model_len=16384,
        )
        with VllmEngine(config, VllmOptions(kv_cache_gib=1.0)) as engine:
            print(
                f"\n{'fork' if fork else 'plain'}: engine start-up {engine.startup_seconds:.1f} s"
            )
            prepare = engine.preparer()
            payloads = [prepare(image) for image in images]
            bench(engine, payloads[: min(4, len(payloads))], 4)  # warm-up
            print(header)
            for batch in batch_sizes:
                row = bench(engine, payloads, batch)
                print(
                    f"{'fork' if fork else 'plain':6} {batch:5d} {row['pages/s']:8.2f} "
                    f"{row['tokens/s']:8.0f} {row['steps/page']:9.1f} {row['tokens/page']:7.1f} "
                    f"{row['tokens/step']:8.2f} "
                    f"{row['forks/page']:8.2f} {row['cache hit']:6.1%}"
                )
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
    print(f"\npeak resident memory of this process: {peak:.2f} GiB")
    if tmp is not None:
        tmp.cleanup()


if __name__ == "__main__":
    main()
