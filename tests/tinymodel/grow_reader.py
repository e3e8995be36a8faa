"""Grow a tiny checkpoint by whole layers, keeping what it computes: a larger model to train on.

    python -m tests.tinymodel.grow_reader --start DIR --out DIR [--vision-layers 1] [--llm-layers 1]

New layers go after the last ones (vision encoder, then decoder), random like a fresh model's
but with their output projections zero (the vision layer's attention `proj` and MLP `fc2`, the
decoder layer's `o_proj` and `down_proj`), so that each starts as the identity on the residual
stream and the grown model writes the same logits as the one it grew from (checked before it is
written). The gradient reaches those projections at once, and through them the rest of the new
layers. Only `num_hidden_layers` changes in config.json; weights, tokenizer and the other
config fields are the start checkpoint's. Used for tests/fixtures/tiny-hpd-reader's fifth
stage (its README).
"""

from __future__ import annotations

import argparse
import copy
import sys
from pathlib import Path

import torch

from hpdparse.engines.torch.modeling import HpdModel
from hpdparse.hpd.model_config import HpdModelConfig
from tests.tinymodel import layout, reading
from tests.tinymodel.train_reader import Reader

ZEROED = ("attn.proj.", "mlp.fc2.", "self_attn.o_proj.", "mlp.down_proj.")


def grown_config(config: dict, vision_layers: int, llm_layers: int) -> dict:
    out = copy.deepcopy(config)
    out["vision_config"]["num_hidden_layers"] += vision_layers
    out["llm_config"]["num_hidden_layers"] += llm_layers
    return out


def grow(r: Reader, config: dict, seed: int) -> HpdModel:
    """A model of `config` holding `r.model`'s weights, its new layers as the identity."""
    model = HpdModel(HpdModelConfig.from_dict(config))
    layout.init_weights_randomly(model, seed)
    old = r.model.state_dict()
    with torch.no_grad():
        for name, p in model.state_dict().items():
            if name in old:
                p.copy_(old[name])
            elif any(part in name for part in ZEROED):
                p.zero_()
    return model


def same_logits(r: Reader, grown: HpdModel) -> float:
    """The largest difference between the two models' logits on a reading page's prompt."""
    page = reading.reading_page("grow/check")
    px, n = r.pixels(page.image)
    prompt = r.pb.build(n, True)
    ids = torch.tensor([prompt])
    diffs = []
    with torch.no_grad():
        for model in (r.model, grown):
            embeds = model.embed_tokens(ids)
            feats = model.image_features(px).reshape(-1, model.config.hidden_size)
            embeds[0, ids[0] == r.ids.img_context] = feats
            hidden = model.decoder(inputs_embeds=embeds).last_hidden_state
            diffs.append(model.logits(hidden))
    return float((diffs[0] - diffs[1]).abs().max())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--start", type=Path, required=True)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--vision-layers", type=int, default=1)
    parser.add_argument("--llm-layers", type=int, default=1)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    torch.manual_seed(args.seed)
    r = Reader(args.start)
    r.model.eval()
    config = grown_config(r.config, args.vision_layers, args.llm_layers)
    grown = grow(r, config, args.seed).eval()
    diff = same_logits(r, grown)
    if diff > 1e-4:
        print(f"FAILED: the grown model's logits differ by {diff:.2e}", file=sys.stderr)
        return 1
    readme = f"# grown from {args.start.name}: +{args.vision_layers} vision, "
    readme += f"+{args.llm_layers} decoder layer(s)\n"
    layout.write_checkpoint(grown, config, r.tok, args.out, readme)
    print(f"wrote {args.out}; logits as before within {diff:.1e}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
