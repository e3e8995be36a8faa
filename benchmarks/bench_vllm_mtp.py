"""P-MTP on the vLLM engine: fork, fork + P-MTP, plain, plain + P-MTP on the same pages.

    .venv/bin/python benchmarks/bench_vllm_mtp.py [--model tests/fixtures/tiny-hpd] [--pages 32]
        [--batch-sizes 16] [--max-tokens 400] [--speculative-tokens 6]
        [--instrument hpd-like|forking] [--head as-is|chain]

Prints per mode and batch size: pages/s, output tokens/s, decoding steps per page (engine steps
in which the page produced a token), output tokens per step, forks per page, drafted tokens per
page and the acceptance rate (accepted / drafted draft tokens, vLLM's per-request counts).
--instrument rewires a copy of the checkpoint into a deterministic writer (see bench_vllm.py);
--head chain rewires its P-MTP head to propose the chain's next token from the embedding half of
its input (right wherever the next token does not depend on more than the last one; the
hpd-like instrument's mode-dependent turns are the exceptions), --head as-is keeps the
checkpoint's own head (random in an untrained fixture: acceptance near 0, so the P-MTP rows show
its overhead). Asserts nothing.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

import bench_vllm  # noqa: E402
from bench_vllm import sample_images, write_hpd_like_checkpoint  # noqa: E402

from hpdparse.engines.base import EngineConfig  # noqa: E402
from hpdparse.engines.vllm.engine import VllmEngine  # noqa: E402
from hpdparse.engines.vllm.mtp import MTP_PREFIX  # noqa: E402
from hpdparse.engines.vllm.options import VllmOptions  # noqa: E402


def rewire_head_to_chain(model: Path) -> None:
    """x = fc(cat(h, e)) keeps e, the MLP adds nothing: h' is e's normalised embedding, so
    lm_head(h') is the successor of e's token wherever the target's logits depend only on it."""
    import torch
    from safetensors.torch import load_file, save_file

    w = load_file(str(model / "model.safetensors"))
    hidden = w["language_model.model.embed_tokens.weight"].shape[1]
    w[MTP_PREFIX + "fc.weight"] = torch.cat([torch.zeros(hidden, hidden), torch.eye(hidden)], 1)
    for norm in ("pre_fc_norm_hidden", "pre_fc_norm_embedding", "norm"):
        w[MTP_PREFIX + norm + ".weight"] = torch.ones(hidden)
    w[MTP_PREFIX + "layers.0.mlp.down_proj.weight"].zero_()
    save_file({k: v.contiguous() for k, v in w.items()}, str(model / "model.safetensors"))


def bench(engine: VllmEngine, payloads: list, batch: int) -> dict[str, float]:
    """bench_vllm's figures plus drafted tokens per page and the acceptance rate."""
    results, figures = bench_vllm.timed_run(engine, payloads, batch)
    drafted = sum(r.stats.get("drafted_tokens", 0) for r in results)
    accepted = sum(r.stats.get("accepted_tokens", 0) for r in results)
    figures["drafted/page"] = drafted / len(results)
    figures["acceptance"] = accepted / drafted if drafted else 0.0
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=str(REPO / "tests" / "fixtures" / "tiny-hpd"))
    parser.add_argument("--pages", type=int, default=32)
    parser.add_argument("--batch-sizes", default="16")
    parser.add_argument("--max-tokens", type=int, default=400)
    parser.add_argument("--speculative-tokens", type=int, default=6)
    parser.add_argument("--dpi", type=int, default=72)
    parser.add_argument("--dtype", default=None, help="default: the engine's (float32 on CPU)")
    parser.add_argument("--instrument", choices=["hpd-like", "forking"])
    parser.add_argument("--head", choices=["as-is", "chain"], default="as-is")
    args = parser.parse_args()
    os.environ.setdefault("OMP_NUM_THREADS", "1")

    model = Path(args.model)
    tmp = tempfile.TemporaryDirectory()
    os.environ.setdefault("HPDPARSE_CACHE", str(Path(tmp.name) / "cache"))
    if args.instrument == "forking":
        from tests.helpers.vllm import write_forking_checkpoint

        model = write_forking_checkpoint(Path(tmp.name) / "ckpt")
    elif args.instrument == "hpd-like":
        model = write_hpd_like_checkpoint(model, Path(tmp.name) / "ckpt")
    if args.head == "chain":
        if model == Path(args.model):
            import shutil

            model = Path(shutil.copytree(model, Path(tmp.name) / "ckpt"))
        rewire_head_to_chain(model)
    batch_sizes = [int(b) for b in args.batch_sizes.split(",")]
    images = sample_images(args.dpi, args.pages)
    print(
        f"model {args.model} (instrument {args.instrument or 'none'}, head {args.head}), "
        f"{len(images)} pages, max_tokens {args.max_tokens}, {args.dpi} dpi, "
        f"{args.speculative_tokens} speculative tokens"
    )
    header = f"{'mode':11} {'batch':>5} {'pages/s':>8} {'tok/s':>8} {'steps/pg':>9} "
    header += f"{'tok/step':>8} {'forks/pg':>8} {'draft/pg':>8} {'accept':>7}"
    print(header)
    for fork, mtp in ((True, False), (True, True), (False, False), (False, True)):
        name = ("fork" if fork else "plain") + ("+P-MTP" if mtp else "")
        config = EngineConfig(
            model=str(model),
            fork=fork,
            mtp=mtp,
            speculative_tokens=args.speculative_tokens,
            dtype=args.dtype,
            max_tokens=args.max_tokens,
            max_model_len=16384,
        )
        with VllmEngine(config, VllmOptions(kv_cache_gib=1.0)) as engine:
            prepare = engine.preparer()
            payloads = [prepare(image) for image in images]
            bench(engine, payloads[: min(4, len(payloads))], 4)  # warm-up
            for batch in batch_sizes:
                row = bench(engine, payloads, batch)
                print(
                    f"{name:11} {batch:5d} {row['pages/s']:8.2f} {row['tokens/s']:8.0f} "
                    f"{row['steps/page']:9.1f} {row['tokens/step']:8.2f} "
                    f"{row['forks/page']:8.2f} {row['drafted/page']:8.1f} "
                    f"{row['acceptance']:7.1%}"
                )
    tmp.cleanup()


if __name__ == "__main__":
    main()
