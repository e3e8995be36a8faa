"""A real-size HPD-Parsing instrument: the real model's config and tensor shapes, weights arranged
so that every page gets one known HPD page, in fork and in plain mode.

    python benchmarks/instrument.py OUT [--blocks 24] [--tokens-per-page 1770]
        [--child-lengths 40,300,...] [--pmtp-rate 0.7] [--plain] [--seed 0] [--reduced]
        [--vision-layers N]

OUT gets config.json (InternViT-300M + 28-layer, 1,024-wide Qwen3 decoder, vocab 151,681, the
real special-token ids), a tokenizer with those ids, model.safetensors (~2.1 GB in bfloat16, the
P-MTP head inside) and expected.txt, the raw text every page must decode to. With the fork
prompt the layout branch writes ``<BLOCK>label [x1, y1, x2, y2]<FORK>`` for each of --blocks
blocks and every child writes its content (lengths from --child-lengths, or drawn from --seed to
make --tokens-per-page output tokens a page, the vendor's average); with the plain prompt the
same text comes in one branch. --plain makes a checkpoint that writes in one branch whatever the
prompt. The P-MTP head's drafts are right except after a (1 - --pmtp-rate) share of the page's
tokens. --reduced keeps the widths but 1 vision layer, 2 decoder layers and a 4,096-token
vocabulary (for tests and CPU runs). --vision-layers N keeps N of the vision encoder's 24 layers
and the rest at real size: the decoder, where every decoding step is spent, as the real model's,
with a vision encoder that no longer costs minutes a page on a CPU (the page does not depend on
it). Nothing here is the real model's output; it is generated, never committed (see the README,
"Performance").
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

from hpdparse.hpd import protocol as P  # noqa: E402
from hpdparse.hpd.model_config import HpdModelConfig  # noqa: E402

TINY = REPO / "tests" / "fixtures" / "tiny-hpd"
REAL_VOCAB = 151681
# Offsets from the end of the vocabulary, as in the real one (<|endoftext|> is 151643).
SPECIAL_OFFSETS = {
    P.ENDOFTEXT: 38,
    P.IM_START: 37,
    P.IM_END: 36,
    P.IMG_START: 12,
    P.IMG_END: 11,
    P.IMG_CONTEXT: 10,
    P.BLOCK: 3,
    P.FORK: 2,
    P.CHILD: 1,
}
HEADER_TOKENS = 4


def real_config(vocab: int = REAL_VOCAB, vision_layers: int = 24, llm_layers: int = 28) -> dict:
    """HPD-Parsing's config.json (docs: README "Performance"), sizes adjustable for --reduced."""
    ids = {t: vocab - off for t, off in SPECIAL_OFFSETS.items()}
    vision = {
        "architectures": ["InternVisionModel"],
        "model_type": "intern_vit_6b",
        "hidden_size": 1024,
        "intermediate_size": 4096,
        "num_hidden_layers": vision_layers,
        "num_attention_heads": 16,
        "num_channels": 3,
        "patch_size": 14,
        "image_size": 448,
        "qkv_bias": True,
        "qk_normalization": False,
        "norm_type": "layer_norm",
        "layer_norm_eps": 1e-6,
        "hidden_act": "gelu",
        "initializer_factor": 1.0,
        "initializer_range": 0.02,
        "use_flash_attn": False,
        "dropout": 0.0,
        "drop_path_rate": 0.0,
        "attention_dropout": 0.0,
    }
    llm = {
        "architectures": ["Qwen3ForCausalLM"],
        "model_type": "qwen3",
        "vocab_size": vocab,
        "hidden_size": 1024,
        "intermediate_size": 3072,
        "num_hidden_layers": llm_layers,
        "num_attention_heads": 16,
        "num_key_value_heads": 8,
        "head_dim": 128,
        "hidden_act": "silu",
        "max_position_embeddings": 40960,
        "rms_norm_eps": 1e-6,
        "rope_theta": 1000000.0,
        "attention_bias": False,
        "attention_dropout": 0.0,
        "tie_word_embeddings": False,
        "use_cache": True,
        "use_sliding_window": False,
        "sliding_window": None,
        "bos_token_id": ids[P.ENDOFTEXT],
        "eos_token_id": ids[P.IM_END],
        "pad_token_id": ids[P.ENDOFTEXT],
    }
    return {
        "_name_or_path": "hpdparse/real-size-instrument",
        "architectures": ["InternVLChatModel"],
        "model_type": "internvl_chat",
        "downsample_ratio": 0.5,
        "dynamic_image_size": True,
        "force_image_size": 448,
        "min_dynamic_patch": 1,
        "max_dynamic_patch": 24,
        "use_thumbnail": True,
        "ps_version": "v2",
        "select_layer": -1,
        "template": "internvl2_5",
        "fork_token_id": ids[P.FORK],
        "child_token_id": ids[P.CHILD],
        "eos_token_id": ids[P.IM_END],
        "pad_token_id": ids[P.ENDOFTEXT],
        "torch_dtype": "bfloat16",
        "tie_word_embeddings": False,
        "vision_config": vision,
        "llm_config": llm,
    }


@dataclass
class Spec:
    blocks: int = 24
    tokens_per_page: int = 1770
    child_lengths: list[int] | None = None
    pmtp_rate: float = 0.7
    plain: bool = False
    seed: int = 0
    reduced: bool = False
    vision_layers: int | None = None  # None: 24, or 1 when reduced

    def lengths(self) -> list[int]:
        """Each child's content tokens (after its <CHILD>)."""
        if self.child_lengths:
            if len(self.child_lengths) != self.blocks or min(self.child_lengths) < 1:
                raise SystemExit("--child-lengths: one length of at least 1 per block")
            return list(self.child_lengths)
        content = self.tokens_per_page - self.blocks * (HEADER_TOKENS + 2)
        if content < 2 * self.blocks:
            raise SystemExit("--tokens-per-page too small for --blocks")
        rng = random.Random(self.seed)
        weights = [rng.lognormvariate(0.0, 1.0) for _ in range(self.blocks)]
        lengths = [max(2, round(content * w / sum(weights))) for w in weights]
        lengths[lengths.index(max(lengths))] += content - sum(lengths)
        return lengths


@dataclass
class Page:
    """The page every request decodes to, as token ids, and the rules that make it."""

    fork: int
    child: int
    im_end: int
    im_start: int
    fork_marker: int
    prompt_last: int
    decoy: int
    blocks: list[int] = field(default_factory=list)  # BLOCK_k: <BLOCK> or "\n...<BLOCK>"
    headers: list[list[int]] = field(default_factory=list)
    children: list[list[int]] = field(default_factory=list)
    hard_tokens: list[int] = field(default_factory=list)

    @property
    def markers(self) -> list[int]:
        return [h[-1] for h in self.headers]

    @property
    def query_tokens(self) -> list[int]:
        return [self.fork, self.child]

    @property
    def child_ends(self) -> list[int]:
        return [c[-1] for c in self.children]

    @property
    def after_fork(self) -> list[int]:
        return self.blocks[1:] + [self.im_end]

    @property
    def child_firsts(self) -> list[int]:
        return [c[0] for c in self.children]

    @property
    def plain_turns(self) -> list[int]:
        return [self.child, *self.blocks[1:]]

    @property
    def chain(self) -> list[tuple[int, int]]:
        """(token, the token it follows) for every one-predecessor step of the page."""
        pairs = [(self.blocks[0], self.prompt_last)]
        parts = zip(self.blocks, self.headers, self.children, strict=True)
        for k, (block, header, child) in enumerate(parts):
            pairs.append((header[0], block))
            pairs += list(zip(header[1:], header[:-1], strict=True))
            pairs += list(zip(child[1:], child[:-1], strict=True))
            pairs.append((self.after_fork[k], child[-1]))  # plain mode; im_end for the last
        return pairs

    def spliced(self) -> list[int]:
        """The page's output tokens, children spliced in (both modes), stop tokens left out."""
        out: list[int] = []
        for block, header, child in zip(self.blocks, self.headers, self.children, strict=True):
            out += [block, *header, self.child, *child]
        return out


def _bytes_to_unicode() -> dict[int, str]:
    """GPT-2's byte-level alphabet (what a ByteLevel BPE vocabulary is spelled in)."""
    keep = [*range(ord("!"), ord("~") + 1), *range(0xA1, 0xAD), *range(0xAE, 0x100)]
    table, extra = {}, 0
    for b in range(256):
        if b in keep:
            table[b] = chr(b)
        else:
            table[b] = chr(256 + extra)
            extra += 1
    return table


def _spell(text: str, table: dict[int, str]) -> str:
    return "".join(table[b] for b in text.encode("utf-8"))


def _header_texts(blocks: int) -> list[list[str]]:
    """Four distinct pieces per block: "label [x1," " y1," " x2," " y2]"."""
    labels = ["title", "text", "text", "paragraph_title", "text", "text"]
    step = 900 // max(1, blocks)
    headers = [
        [
            f"{labels[k % len(labels)]} [{80 + k},",
            f" {40 + step * k},",
            f" {950 - k},",
            f" {40 + step * k + max(1, step - 5)}]",
        ]
        for k in range(blocks)
    ]
    pieces = [p for h in headers for p in h]
    if len(set(pieces)) != len(pieces):
        raise SystemExit(f"cannot make {blocks} distinct block headers; use fewer --blocks")
    return headers


def _tokenizer_and_page(spec: Spec, vocab: int) -> tuple[Any, Page]:
    """The tiny checkpoint's BPE (it spells the prompt) widened to `vocab` ids: the page's
    pieces, fillers, and the special tokens at the real ids (counted from the end)."""
    from tokenizers import AddedToken, Tokenizer, models

    from hpdparse.hpd.prompt import PromptBuilder, token_ids

    tiny = json.loads((TINY / "tokenizer.json").read_text(encoding="utf-8"))
    base: dict[str, int] = dict(tiny["model"]["vocab"])
    table = _bytes_to_unicode()
    headers = _header_texts(spec.blocks)
    lengths = spec.lengths()
    pieces = [_spell("\n" + " " * (k - 1) + P.BLOCK, table) for k in range(1, spec.blocks)]
    pieces += [_spell(p, table) for h in headers for p in h]
    pieces += [_spell(f" c{k}_{i}", table) for k, n in enumerate(lengths) for i in range(n)]
    pieces.append(_spell(" <decoy>", table))
    first_special = vocab - max(SPECIAL_OFFSETS.values())
    if len(base) + len(pieces) > first_special:
        raise SystemExit(f"a vocabulary of {vocab} cannot hold this page")
    model_vocab = dict(base)
    for piece in pieces:
        model_vocab[piece] = len(model_vocab)
    while len(model_vocab) < first_special:
        model_vocab[f"~filler{len(model_vocab)}~"] = len(model_vocab)
    merges = [
        tuple(m.split(" ")) if isinstance(m, str) else tuple(m) for m in tiny["model"]["merges"]
    ]
    tok = Tokenizer(models.BPE(vocab=model_vocab, merges=merges, fuse_unk=False))
    tok.normalizer = Tokenizer.from_str(json.dumps(tiny)).normalizer
    tok.pre_tokenizer = Tokenizer.from_str(json.dumps(tiny)).pre_tokenizer
    tok.decoder = Tokenizer.from_str(json.dumps(tiny)).decoder
    by_id = {vocab - off: t for t, off in SPECIAL_OFFSETS.items()}
    for i in range(first_special, vocab):
        content = by_id.get(i, f"<|reserved_{i}|>")
        tok.add_special_tokens([AddedToken(content, special=True, normalized=False)])
        assert tok.token_to_id(content) == i, (content, i)
    ids = token_ids(tok, HpdModelConfig.from_dict(real_config(vocab)), "instrument")
    template = json.loads((TINY / "tokenizer_config.json").read_text())["chat_template"]
    builder = PromptBuilder(tok, ids, template)
    fork_prompt, plain_prompt = builder.build(1, True), builder.build(1, False)
    fork_only = [t for t in fork_prompt if t not in plain_prompt and fork_prompt.count(t) == 1]
    assert fork_only and fork_prompt[-1] == plain_prompt[-1]
    piece_id = iter(model_vocab[p] for p in pieces)
    page = Page(
        fork=ids.fork,
        child=ids.child,
        im_end=ids.im_end,
        im_start=tok.token_to_id(P.IM_START),
        fork_marker=fork_only[0],
        prompt_last=fork_prompt[-1],
        decoy=model_vocab[pieces[-1]],
    )
    page.blocks = [ids.block] + [next(piece_id) for _ in range(spec.blocks - 1)]
    page.headers = [[next(piece_id) for _ in range(HEADER_TOKENS)] for _ in range(spec.blocks)]
    page.children = [[next(piece_id) for _ in range(n)] for n in lengths]
    page.hard_tokens = _hard_tokens(page, spec)
    return tok, page


def _hard_tokens(page: Page, spec: Spec) -> list[int]:
    """Tokens after which the P-MTP head drafts wrong: a (1 - rate) share of the positions."""
    positions = page.spliced()
    unique = [t for t in positions if positions.count(t) == 1]
    wanted = round((1.0 - spec.pmtp_rate) * len(positions))
    return sorted(random.Random(spec.seed + 1).sample(unique, min(wanted, len(unique))))


def write_instrument(out: Path, spec: Spec) -> Path:
    """Write the checkpoint and expected.txt into `out` (made; must not exist)."""
    import torch
    from instrument_weights import MAX_BLOCKS, arrange, random_weights
    from safetensors.torch import save_file

    if not 1 <= spec.blocks <= MAX_BLOCKS:
        raise SystemExit(f"--blocks must be 1 to {MAX_BLOCKS}")
    vocab, (vision_layers, llm_layers) = (4096, (1, 2)) if spec.reduced else (REAL_VOCAB, (24, 28))
    config = real_config(vocab, spec.vision_layers or vision_layers, llm_layers)
    tok, page = _tokenizer_and_page(spec, vocab)
    out.mkdir(parents=True)
    for name in ("configuration_intern_vit.py", "configuration_internvl_chat.py"):
        shutil.copy2(TINY / name, out / name)
    config["auto_map"] = {"AutoConfig": "configuration_internvl_chat.InternVLChatConfig"}
    (out / "config.json").write_text(json.dumps(config, indent=2) + "\n", encoding="utf-8")
    generation = {"do_sample": False, "eos_token_id": [page.im_end], "max_new_tokens": 8000}
    (out / "generation_config.json").write_text(json.dumps(generation, indent=2) + "\n")
    _write_tokenizer(tok, out)
    weights = random_weights(config, spec.seed)
    arrange(weights, page, spec.seed, spec.plain)
    save_file(
        {k: v.to(torch.bfloat16).contiguous() for k, v in weights.items()},
        str(out / "model.safetensors"),
    )
    text = tok.decode(page.spliced(), skip_special_tokens=False)
    (out / "expected.txt").write_text(text, encoding="utf-8")
    return out


def _write_tokenizer(tok: Any, out: Path) -> None:
    from tests.tinymodel.tokenizer import write_tokenizer_files

    write_tokenizer_files(tok, out, model_max_length=40960)
    config = json.loads((out / "tokenizer_config.json").read_text(encoding="utf-8"))
    for token in json.loads(tok.to_str())["added_tokens"]:
        config["added_tokens_decoder"][str(token["id"])] = {
            key: token[key] for key in ("content", "lstrip", "normalized", "rstrip", "single_word")
        } | {"special": True}
    (out / "tokenizer_config.json").write_text(json.dumps(config, indent=2, ensure_ascii=False))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path, help="folder to create")
    parser.add_argument("--blocks", type=int, default=24)
    parser.add_argument("--tokens-per-page", type=int, default=1770)
    parser.add_argument("--child-lengths", help="comma-separated content tokens per child")
    parser.add_argument("--pmtp-rate", type=float, default=0.7)
    parser.add_argument("--plain", action="store_true", help="one branch whatever the prompt")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--reduced", action="store_true", help="1+2 layers, 4,096 tokens")
    parser.add_argument("--vision-layers", type=int, help="of 24 (default: 24; 1 when --reduced)")
    args = parser.parse_args(argv)
    lengths = [int(n) for n in args.child_lengths.split(",")] if args.child_lengths else None
    spec = Spec(args.blocks, args.tokens_per_page, lengths, args.pmtp_rate, args.plain, args.seed)
    spec.reduced = args.reduced
    if args.vision_layers is not None and not 1 <= args.vision_layers <= 24:
        raise SystemExit("--vision-layers must be 1 to 24")
    spec.vision_layers = args.vision_layers
    began = time.perf_counter()
    write_instrument(args.out, spec)
    size = (args.out / "model.safetensors").stat().st_size / 2**30
    tokens = len(spec.lengths()) * (HEADER_TOKENS + 2) + sum(spec.lengths())
    print(
        f"wrote {args.out} in {time.perf_counter() - began:.1f} s: {size:.2f} GiB, "
        f"{spec.blocks} blocks, {tokens} output tokens a page, P-MTP right at {spec.pmtp_rate:.0%}"
        + (", plain only" if spec.plain else "")
    )


if __name__ == "__main__":
    main()
