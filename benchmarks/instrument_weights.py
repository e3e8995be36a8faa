"""The real-size instrument's weights: a dense HPD-Parsing network arranged to write one known page.

Every tensor has the shape of the real model's (benchmarks/instrument.py gives the config); the
decoder computes as much per token as the real one, but only layer 0's attention writes to the
residual stream (every other o_proj and down_proj is zero), so the logits are a function of three
things, each a region of the 1,024-wide hidden state:

- the current token's code (its embedding: a random 700-dim direction of norm 30, plus flags);
- the previous marker's code: head 0 of layer 0 attends from ``<FORK>``/``<CHILD>`` (flag Q) to
  the block headers' last tokens (flag M) with RoPE scores summed over the 16 fastest
  frequencies, which peak at the nearest marker (distance 1) and stay 30% lower at any distance
  of 4 or more, so it reads the one-hot code of the block being forked;
- the mode: head 2 attends from every token to a token only the fork prompt has (value +1), or,
  without one, to the ``<|im_start|>`` tokens (value -1): forks with the fork prompt, the same
  text inline with the plain one.

lm_head rows add up the rules of the page (successor of a token, of a flag, of a marker under
``<FORK>`` or ``<CHILD>``), with margins of 10 or more logits. The P-MTP head copies the draft's
inputs into the shape of the target's next hidden state (its token code from the embedding, the
marker and mode from the hidden state), so its drafts are the target's next tokens, except after
"hard" tokens (a chosen share), where its MLP pushes the draft onto a decoy token.
"""

from __future__ import annotations

import math
from typing import Any

import torch

HIDDEN = 1024
HEAD_DIM = 128
CODE = slice(0, 700)
FLAG_Q, FLAG_M, FLAG_F, FLAG_S, FLAG_HARD, CONST, PAD, MODE, FLAG_E, DECOY = range(700, 710)
OWN_MARKER = 768  # 128 dims: the block's one-hot code, on the header's last token
PREV_MARKER = 896  # 128 dims: what head 0 reads (the nearest marker's code)
MAX_BLOCKS = 128
CODE_NORM = 30.0
GAIN = 4.0  # layer 0's o_proj gain for the marker and mode outputs
QK_WEIGHT = math.sqrt(11.3)  # q_norm/k_norm weight on the used dims: 116 vs 80 vs 0 (head 0)
FAST_FREQUENCIES = 16
MODE_DIMS = (62, 63)  # the two slowest RoPE pairs: no rotation to speak of over 40k positions


def _embeddings(vocab: int, page: Any, generator: torch.Generator) -> torch.Tensor:
    """Rows of norm sqrt(HIDDEN): code, flags, own marker code, a constant and padding."""
    embed = torch.zeros(vocab, HIDDEN)
    code = torch.randn(vocab, CODE.stop, generator=generator)
    embed[:, CODE] = code * (CODE_NORM / code.norm(dim=1, keepdim=True))
    embed[:, CONST] = 1.0
    embed[page.query_tokens, FLAG_Q] = 1.0
    embed[page.fork_marker, FLAG_F] = 1.0
    embed[page.im_start, FLAG_S] = 1.0
    embed[page.hard_tokens, FLAG_HARD] = 1.0
    embed[page.child_ends, FLAG_E] = 1.0
    for k, token in enumerate(page.markers):
        embed[token, FLAG_M] = 1.0
        embed[token, OWN_MARKER + k] = 1.0
    rest = embed.pow(2).sum(dim=1)
    embed[:, PAD] = (HIDDEN - rest).clamp(min=0).sqrt()
    return embed


def _layer0_attention(weights: dict[str, torch.Tensor], prefix: str, plain_only: bool) -> None:
    q, k = weights[prefix + "q_proj.weight"], weights[prefix + "k_proj.weight"]
    v, o = weights[prefix + "v_proj.weight"], weights[prefix + "o_proj.weight"]
    for tensor in (q, k, v, o):
        tensor.zero_()
    for i in range(FAST_FREQUENCIES):  # head 0 / kv head 0: the nearest marker
        q[i, FLAG_Q] = 1.0
        k[i, FLAG_M] = 1.0
    for j in range(HEAD_DIM):
        v[j, OWN_MARKER + j] = 1.0
        o[PREV_MARKER + j, j] = GAIN
    lo, hi = MODE_DIMS  # head 2 / kv head 1: the mode
    q[2 * HEAD_DIM + lo, CONST] = q[2 * HEAD_DIM + hi, CONST] = 1.0
    k[HEAD_DIM + lo, FLAG_F] = k[HEAD_DIM + hi, FLAG_F] = 1.0
    k[HEAD_DIM + hi, FLAG_S] = 1.0
    v[HEAD_DIM, FLAG_F] = -1.0 if plain_only else 1.0
    v[HEAD_DIM, FLAG_S] = -1.0
    o[MODE, 2 * HEAD_DIM] = GAIN
    norm = torch.ones(HEAD_DIM)
    norm[:FAST_FREQUENCIES] = QK_WEIGHT
    norm[HEAD_DIM // 2 : HEAD_DIM // 2 + FAST_FREQUENCIES] = QK_WEIGHT
    norm[list(MODE_DIMS) + [d + HEAD_DIM // 2 for d in MODE_DIMS]] = QK_WEIGHT
    weights[prefix + "q_norm.weight"] = norm.clone()
    weights[prefix + "k_norm.weight"] = norm.clone()


def _lm_head(vocab: int, embed: torch.Tensor, page: Any) -> torch.Tensor:
    """Each rule adds to the row of the token it predicts (see the module docstring)."""
    head = torch.zeros(vocab, HIDDEN)
    unit = embed[:, CODE] / CODE_NORM

    def follows(token: int, predecessor: int) -> None:
        head[token, CODE] += unit[predecessor]

    for token, predecessor in page.chain:
        follows(token, predecessor)
    mode = 10.0 / GAIN
    head[page.fork, FLAG_M] += 30.0  # a header's last token: <FORK> (fork) or <CHILD> (plain)
    head[page.fork, MODE] += mode
    head[page.child, FLAG_M] += 30.0
    head[page.im_end, FLAG_E] += 30.0
    head[page.im_end, MODE] += mode
    marker = 50.0 / GAIN
    rules = zip(page.after_fork, page.child_firsts, strict=True)
    for k, (after_fork, child_first) in enumerate(rules):
        follows(after_fork, page.fork)
        head[after_fork, PREV_MARKER + k] += marker
        follows(child_first, page.child)
        head[child_first, PREV_MARKER + k] += marker
    for token in page.plain_turns:  # the inline <CHILD>... tokens and the later <BLOCK>s
        head[token, MODE] -= mode
    head[page.decoy, DECOY] = 3.0
    return head


def _pmtp(weights: dict[str, torch.Tensor], prefix: str) -> None:
    fc = torch.zeros(HIDDEN, 2 * HIDDEN)
    fc[:, HIDDEN:] = torch.eye(HIDDEN)  # the embedding of the token drafted from
    for j in range(HEAD_DIM):  # the hidden state's own marker is the next position's previous
        fc[PREV_MARKER + j, OWN_MARKER + j] = GAIN
    fc[MODE, MODE] = 1.0
    weights[prefix + "fc.weight"] = fc
    for name in ("pre_fc_norm_hidden", "pre_fc_norm_embedding", "norm"):
        weights[prefix + name + ".weight"] = torch.ones(HIDDEN)
    mlp = prefix + "layers.0.mlp."
    gate, up = weights[mlp + "gate_proj.weight"], weights[mlp + "up_proj.weight"]
    gate.zero_()
    up.zero_()
    gate[0, FLAG_HARD] = up[0, FLAG_HARD] = 5.0
    down = weights[mlp + "down_proj.weight"]
    down.zero_()
    down[DECOY, 0] = 4.0


def arrange(weights: dict[str, torch.Tensor], page: Any, seed: int, plain_only: bool) -> None:
    """Overwrite the language model's tensors (in place) so that it writes ``page``."""
    generator = torch.Generator().manual_seed(seed)
    lm = "language_model.model."
    vocab = weights[lm + "embed_tokens.weight"].shape[0]
    embed = _embeddings(vocab, page, generator)
    weights[lm + "embed_tokens.weight"] = embed
    for name, tensor in weights.items():
        if name.startswith(lm + "layers.") and name.endswith(("o_proj.weight", "down_proj.weight")):
            tensor.zero_()
        elif name.startswith(lm) and name.endswith("layernorm.weight"):
            tensor.fill_(1.0)
    weights[lm + "norm.weight"] = torch.ones(HIDDEN)
    _layer0_attention(weights, lm + "layers.0.self_attn.", plain_only)
    weights["language_model.lm_head.weight"] = _lm_head(vocab, embed, page)
    _pmtp(weights, "language_model.mtp.")
    # Image embeddings are zero: they can neither key nor value the heads above.
    weights["mlp1.3.weight"].zero_()
    weights["mlp1.3.bias"].zero_()


def _shapes(config: dict) -> dict[str, tuple[int, ...]]:
    """Every tensor of an HPD-Parsing checkpoint with this config, and its shape."""
    v, t = config["vision_config"], config["llm_config"]
    vh, th, heads = v["hidden_size"], t["hidden_size"], t["num_attention_heads"]
    hd, kv, ti = t["head_dim"], t["num_key_value_heads"], t["intermediate_size"]
    patches = (v["image_size"] // v["patch_size"]) ** 2
    shuffle = vh * int(1 / config["downsample_ratio"]) ** 2
    shapes: dict[str, tuple[int, ...]] = {
        "vision_model.embeddings.class_embedding": (1, 1, vh),
        "vision_model.embeddings.patch_embedding.weight": (vh, 3, v["patch_size"], v["patch_size"]),
        "vision_model.embeddings.patch_embedding.bias": (vh,),
        "vision_model.embeddings.position_embedding": (1, patches + 1, vh),
        "mlp1.0.weight": (shuffle,),
        "mlp1.0.bias": (shuffle,),
        "mlp1.1.weight": (th, shuffle),
        "mlp1.1.bias": (th,),
        "mlp1.3.weight": (th, th),
        "mlp1.3.bias": (th,),
        "language_model.model.embed_tokens.weight": (t["vocab_size"], th),
        "language_model.model.norm.weight": (th,),
        "language_model.lm_head.weight": (t["vocab_size"], th),
    }
    for i in range(v["num_hidden_layers"]):
        p, vi = f"vision_model.encoder.layers.{i}.", v["intermediate_size"]
        shapes |= {p + "attn.qkv.weight": (3 * vh, vh), p + "attn.qkv.bias": (3 * vh,)}
        shapes |= {p + "attn.proj.weight": (vh, vh), p + "attn.proj.bias": (vh,)}
        shapes |= {p + "mlp.fc1.weight": (vi, vh), p + "mlp.fc1.bias": (vi,)}
        shapes |= {p + "mlp.fc2.weight": (vh, vi), p + "mlp.fc2.bias": (vh,)}
        for name in ("ls1", "ls2", "norm1.weight", "norm1.bias", "norm2.weight", "norm2.bias"):
            shapes[p + name] = (vh,)
    for i in range(t["num_hidden_layers"]):
        p = f"language_model.model.layers.{i}."
        shapes |= {p + "self_attn.q_proj.weight": (heads * hd, th)}
        shapes |= {p + "self_attn.k_proj.weight": (kv * hd, th)}
        shapes |= {p + "self_attn.v_proj.weight": (kv * hd, th)}
        shapes |= {p + "self_attn.o_proj.weight": (th, heads * hd)}
        shapes |= {p + "self_attn.q_norm.weight": (hd,), p + "self_attn.k_norm.weight": (hd,)}
        shapes |= {p + "mlp.gate_proj.weight": (ti, th), p + "mlp.up_proj.weight": (ti, th)}
        shapes |= {p + "mlp.down_proj.weight": (th, ti)}
        shapes |= {
            p + "input_layernorm.weight": (th,),
            p + "post_attention_layernorm.weight": (th,),
        }
    m = "language_model.mtp."
    shapes |= {m + "fc.weight": (th, 2 * th), m + "norm.weight": (th,)}
    shapes |= {m + "pre_fc_norm_hidden.weight": (th,), m + "pre_fc_norm_embedding.weight": (th,)}
    shapes |= {
        m + "layers.0.mlp.gate_proj.weight": (ti, th),
        m + "layers.0.mlp.up_proj.weight": (ti, th),
    }
    shapes |= {m + "layers.0.mlp.down_proj.weight": (th, ti)}
    return shapes


def random_weights(config: dict, seed: int) -> dict[str, Any]:
    """Dense weights of every shape: norms 1, biases 0, layer scales 0.1, the rest N(0, 0.02),
    drawn once per shape (the layers of a stack get copies: what they compute is never read, and
    drawing a billion numbers would take most of the time)."""
    import torch

    generator = torch.Generator().manual_seed(seed)
    weights: dict[str, Any] = {}
    drawn: dict[tuple[int, ...], Any] = {}
    for name, shape in _shapes(config).items():
        if name.endswith(("norm.weight", "norm1.weight", "norm2.weight", "mlp1.0.weight")):
            weights[name] = torch.ones(shape)
        elif name.endswith("bias"):
            weights[name] = torch.zeros(shape)
        elif name.endswith(("ls1", "ls2")):
            weights[name] = torch.full(shape, 0.1)
        else:
            if shape not in drawn:  # bfloat16, as saved: half the bytes to copy
                drawn[shape] = torch.randn(shape, generator=generator).mul_(0.02).bfloat16()
            weights[name] = drawn[shape].clone()
    return weights
