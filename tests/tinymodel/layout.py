"""Write a tiny HPD checkpoint in the real layout (InternVL's original `internvl_chat` format).

`python -m tests.tinymodel.layout OUT_DIR` writes a randomly initialised one (for engines that only
need the layout); `tests.tinymodel.train` writes the trained one through `write_checkpoint`.

Folder: config.json (+ the two remote-code config modules its `auto_map` names, so that
`AutoConfig.from_pretrained(..., trust_remote_code=True)` works as for the real checkpoint),
generation_config.json, model.safetensors, tokenizer files, README.md.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import tempfile
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import save_file
from tokenizers import Tokenizer

from hpdparse.engines.torch.modeling import HpdModel
from hpdparse.hpd import protocol as P
from hpdparse.hpd.model_config import HpdModelConfig
from tests.tinymodel import tokenizer as tiny_tok

REPO = Path(__file__).resolve().parents[2]
DEFAULT_OUT = REPO / "tests" / "fixtures" / "tiny-hpd"

TILE = 112
PATCH = 14
MAX_TILES = 4
MAX_POSITIONS = 4096

CONFIGURATION_INTERN_VIT = '''"""InternVisionConfig, InternVL's original format."""

from transformers.configuration_utils import PretrainedConfig


class InternVisionConfig(PretrainedConfig):
    model_type = "intern_vit_6b"

    def __init__(
        self,
        num_channels=3,
        patch_size=14,
        image_size=224,
        qkv_bias=False,
        hidden_size=3200,
        num_attention_heads=25,
        intermediate_size=12800,
        qk_normalization=True,
        num_hidden_layers=48,
        use_flash_attn=True,
        hidden_act="gelu",
        norm_type="rms_norm",
        layer_norm_eps=1e-6,
        dropout=0.0,
        drop_path_rate=0.0,
        attention_dropout=0.0,
        initializer_range=0.02,
        initializer_factor=0.1,
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.num_channels = num_channels
        self.patch_size = patch_size
        self.image_size = image_size
        self.qkv_bias = qkv_bias
        self.hidden_size = hidden_size
        self.num_attention_heads = num_attention_heads
        self.intermediate_size = intermediate_size
        self.qk_normalization = qk_normalization
        self.num_hidden_layers = num_hidden_layers
        self.use_flash_attn = use_flash_attn
        self.hidden_act = hidden_act
        self.norm_type = norm_type
        self.layer_norm_eps = layer_norm_eps
        self.dropout = dropout
        self.drop_path_rate = drop_path_rate
        self.attention_dropout = attention_dropout
        self.initializer_range = initializer_range
        self.initializer_factor = initializer_factor
'''

CONFIGURATION_INTERNVL_CHAT = '''"""InternVLChatConfig, InternVL's original format."""

import copy

from transformers import AutoConfig
from transformers.configuration_utils import PretrainedConfig

from .configuration_intern_vit import InternVisionConfig


class InternVLChatConfig(PretrainedConfig):
    model_type = "internvl_chat"
    is_composition = True

    def __init__(
        self,
        vision_config=None,
        llm_config=None,
        use_backbone_lora=0,
        use_llm_lora=0,
        select_layer=-1,
        force_image_size=None,
        downsample_ratio=0.5,
        template=None,
        dynamic_image_size=False,
        use_thumbnail=False,
        ps_version="v1",
        min_dynamic_patch=1,
        max_dynamic_patch=6,
        **kwargs,
    ):
        super().__init__(**kwargs)
        vision_config = dict(vision_config or {})
        llm_config = dict(llm_config or {"architectures": ["Qwen3ForCausalLM"]})
        self.vision_config = InternVisionConfig(**vision_config)
        llm_type = llm_config.pop("model_type", "qwen3")
        self.llm_config = AutoConfig.for_model(llm_type, **llm_config)
        self.use_backbone_lora = use_backbone_lora
        self.use_llm_lora = use_llm_lora
        self.select_layer = select_layer
        self.force_image_size = force_image_size
        self.downsample_ratio = downsample_ratio
        self.template = template
        self.dynamic_image_size = dynamic_image_size
        self.use_thumbnail = use_thumbnail
        self.ps_version = ps_version
        self.min_dynamic_patch = min_dynamic_patch
        self.max_dynamic_patch = max_dynamic_patch
        self.tie_word_embeddings = self.llm_config.tie_word_embeddings

    def to_dict(self):
        output = copy.deepcopy(self.__dict__)
        output["vision_config"] = self.vision_config.to_dict()
        output["llm_config"] = self.llm_config.to_dict()
        output["model_type"] = self.__class__.model_type
        return output
'''


def tiny_config(tok: Tokenizer) -> dict[str, Any]:
    """config.json of the tiny model: real keys, tiny sizes (head_dim 64 suits vLLM on CPU)."""
    ids = {t: tok.token_to_id(t) for t in tiny_tok.SPECIAL_TOKENS + tiny_tok.HPD_TOKENS}
    vocab = tok.get_vocab_size(with_added_tokens=True)
    return {
        "_name_or_path": "hpdparse/tiny-hpd",
        "architectures": ["InternVLChatModel"],
        "auto_map": {"AutoConfig": "configuration_internvl_chat.InternVLChatConfig"},
        "model_type": "internvl_chat",
        "downsample_ratio": 0.5,
        "dynamic_image_size": True,
        "force_image_size": TILE,
        "min_dynamic_patch": 1,
        "max_dynamic_patch": MAX_TILES,
        "use_thumbnail": True,
        "ps_version": "v2",
        "select_layer": -1,
        "template": "internvl2_5",
        "use_backbone_lora": 0,
        "use_llm_lora": 0,
        "fork_token_id": ids[P.FORK],
        "child_token_id": ids[P.CHILD],
        "eos_token_id": ids[P.IM_END],
        "pad_token_id": ids[P.ENDOFTEXT],
        "torch_dtype": "float32",
        "tie_word_embeddings": False,
        "vision_config": {
            "architectures": ["InternVisionModel"],
            "model_type": "intern_vit_6b",
            "hidden_size": 128,
            "num_attention_heads": 2,
            "intermediate_size": 256,
            "num_hidden_layers": 2,
            "patch_size": PATCH,
            "image_size": TILE,
            "num_channels": 3,
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
            "torch_dtype": "float32",
        },
        "llm_config": {
            "architectures": ["Qwen3ForCausalLM"],
            "model_type": "qwen3",
            "vocab_size": vocab,
            "hidden_size": 128,
            "intermediate_size": 384,
            "num_hidden_layers": 3,
            "num_attention_heads": 2,
            "num_key_value_heads": 1,
            "head_dim": 64,
            "hidden_act": "silu",
            "max_position_embeddings": MAX_POSITIONS,
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
            "torch_dtype": "float32",
        },
    }


def _atomic_write(path: Path, data: bytes) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_checkpoint(
    model: HpdModel, config: dict[str, Any], tok: Tokenizer, out_dir: Path, readme: str
) -> None:
    """Write every file of the checkpoint folder (float32 weights; safetensors key = state key)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    state = {k: v.detach().to(torch.float32).contiguous() for k, v in model.state_dict().items()}
    fd, tmp = tempfile.mkstemp(dir=out_dir, prefix=".model.", suffix=".tmp")
    os.close(fd)
    save_file(state, tmp, metadata={"format": "pt"})
    os.replace(tmp, out_dir / "model.safetensors")
    text = json.dumps(config, indent=2, ensure_ascii=False) + "\n"
    _atomic_write(out_dir / "config.json", text.encode())
    gen = {
        "_from_model_config": True,
        "bos_token_id": config["llm_config"]["bos_token_id"],
        "eos_token_id": [config["eos_token_id"]],
        "pad_token_id": config["pad_token_id"],
        "do_sample": False,
        "max_new_tokens": P.DEFAULT_MAX_TOKENS,
    }
    _atomic_write(out_dir / "generation_config.json", (json.dumps(gen, indent=2) + "\n").encode())
    _atomic_write(out_dir / "configuration_intern_vit.py", CONFIGURATION_INTERN_VIT.encode())
    _atomic_write(out_dir / "configuration_internvl_chat.py", CONFIGURATION_INTERNVL_CHAT.encode())
    tiny_tok.write_tokenizer_files(tok, out_dir, model_max_length=MAX_POSITIONS)
    _atomic_write(out_dir / "README.md", readme.encode())


def build_model(config: dict[str, Any], seed: int) -> HpdModel:
    model = HpdModel(HpdModelConfig.from_dict(config))
    init_weights_randomly(model, seed)
    return model


def init_weights_randomly(model: HpdModel, seed: int) -> None:
    """Deterministic small random init (for fresh checkpoints and training)."""
    gen = torch.Generator().manual_seed(seed)
    for name, p in model.named_parameters():
        with torch.no_grad():
            if name.endswith(("ls1", "ls2")):
                p.fill_(model.config.vision.initializer_factor)
            elif p.dim() == 1:
                is_norm_weight = "norm" in name or name.startswith("mlp1.0")
                p.fill_(1.0 if is_norm_weight and name.endswith("weight") else 0.0)
            else:
                fan_in = p[0].numel() if p.dim() > 1 else p.numel()
                std = 0.02 if "embed" in name else 1.0 / math.sqrt(max(fan_in, 1))
                p.copy_(torch.randn(p.shape, generator=gen) * std)


RANDOM_README = """# tiny-hpd (random weights)

A test instrument for hpdparse, NOT the HPD-Parsing model: a tiny checkpoint in the real
HPD-Parsing / InternVL layout with RANDOM weights (its output is meaningless). Made by
`python -m tests.tinymodel.layout`.
"""


def main(argv: list[str] | None = None) -> None:
    from tests.tinymodel.synth import generate

    parser = argparse.ArgumentParser(description="write a random tiny HPD checkpoint")
    parser.add_argument("out", type=Path, nargs="?", default=DEFAULT_OUT)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    streams = [p.stream for _, _, pages in generate(0) for p in pages]
    tok = tiny_tok.train_tokenizer(streams, vocab_size=1024)
    config = tiny_config(tok)
    torch.manual_seed(args.seed)
    model = build_model(config, args.seed)
    write_checkpoint(model, config, tok, args.out, RANDOM_README)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
