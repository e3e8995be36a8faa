"""Checkpoint resolution, layout checks and loading (tiny checkpoint in the real layout)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

from hpdparse.engines.torch.loading import load_model
from hpdparse.errors import EngineError
from hpdparse.hpd.checkpoint import open_checkpoint
from tests.helpers.patience import PATIENCE_SECONDS

REPO = Path(__file__).resolve().parents[2]
TINY = REPO / "tests" / "fixtures" / "tiny-hpd"


@pytest.fixture
def tiny_copy(tmp_path: Path) -> Path:
    dest = tmp_path / "tiny"
    shutil.copytree(TINY, dest)
    return dest


def _edit_config(folder: Path, **changes: object) -> None:
    cfg = json.loads((folder / "config.json").read_text())
    for key, value in changes.items():
        if value is None:
            cfg.pop(key, None)
        else:
            cfg[key] = value
    (folder / "config.json").write_text(json.dumps(cfg))


def test_tiny_checkpoint_is_in_the_real_layout() -> None:
    cfg = json.loads((TINY / "config.json").read_text())
    assert cfg["architectures"] == ["InternVLChatModel"]
    for key in (
        "auto_map",
        "template",
        "downsample_ratio",
        "force_image_size",
        "min_dynamic_patch",
        "max_dynamic_patch",
        "use_thumbnail",
        "ps_version",
        "select_layer",
        "fork_token_id",
        "child_token_id",
    ):
        assert key in cfg, key
    assert cfg["llm_config"]["architectures"] == ["Qwen3ForCausalLM"]
    assert cfg["llm_config"]["head_dim"] >= 32
    tok_cfg = json.loads((TINY / "tokenizer_config.json").read_text())
    assert tok_cfg["tokenizer_class"] == "Qwen2Tokenizer"
    vocab = json.loads((TINY / "tokenizer.json").read_text())
    added = {t["content"]: t["id"] for t in vocab["added_tokens"]}
    for token in ("<BLOCK>", "<FORK>", "<CHILD>", "<img>", "</img>", "<IMG_CONTEXT>"):
        assert token in added
    for token in ("<|im_start|>", "<|im_end|>", "<|endoftext|>"):
        assert token in added
    assert added["<FORK>"] == cfg["fork_token_id"]
    assert added["<CHILD>"] == cfg["child_token_id"]
    assert (TINY / "model.safetensors").stat().st_size < 8 * 2**20


def test_weight_names_are_internvl_and_vllm_names() -> None:
    from safetensors import safe_open

    with safe_open(str(TINY / "model.safetensors"), "pt") as f:
        keys = set(f.keys())
    for name in (
        "vision_model.embeddings.class_embedding",
        "vision_model.embeddings.patch_embedding.weight",
        "vision_model.embeddings.position_embedding",
        "vision_model.encoder.layers.0.attn.qkv.weight",
        "vision_model.encoder.layers.0.attn.proj.weight",
        "vision_model.encoder.layers.0.ls1",
        "mlp1.0.weight",
        "mlp1.1.weight",
        "mlp1.3.weight",
        "language_model.model.embed_tokens.weight",
        "language_model.model.layers.0.self_attn.q_norm.weight",
        "language_model.model.norm.weight",
        "language_model.lm_head.weight",
        "language_model.mtp.fc.weight",
        "language_model.mtp.pre_fc_norm_hidden.weight",
        "language_model.mtp.pre_fc_norm_embedding.weight",
        "language_model.mtp.layers.0.mlp.gate_proj.weight",
        "language_model.mtp.layers.0.mlp.up_proj.weight",
        "language_model.mtp.layers.0.mlp.down_proj.weight",
        "language_model.mtp.norm.weight",
    ):
        assert name in keys, name


def test_transformers_reads_config_and_tokenizer_as_for_the_real_model() -> None:
    from tokenizers import Tokenizer
    from transformers import AutoConfig, AutoTokenizer

    cfg = AutoConfig.from_pretrained(TINY, trust_remote_code=True)
    assert cfg.fork_token_id == json.loads((TINY / "config.json").read_text())["fork_token_id"]
    assert cfg.llm_config.model_type == "qwen3"
    hf = AutoTokenizer.from_pretrained(TINY, trust_remote_code=True)
    raw = Tokenizer.from_file(str(TINY / "tokenizer.json"))
    text = "<BLOCK>text [1, 2, 30, 400]<CHILD>Data method \\( x^2 \\)<FORK><|im_end|>"
    assert hf.encode(text, add_special_tokens=False) == raw.encode(text).ids
    assert hf.decode(raw.encode(text).ids) == text


def test_loads_from_folder() -> None:
    ckpt = open_checkpoint(str(TINY))
    model = load_model(ckpt)
    assert model.has_mtp
    assert ckpt.revision is None


def test_missing_folder_is_one_line(tmp_path: Path) -> None:
    with pytest.raises(EngineError, match="no such folder") as err:
        open_checkpoint(str(tmp_path / "nope"))
    assert "\n" not in str(err.value)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"fork_token_id": None}, "stock InternVL"),
        ({"architectures": ["LlamaForCausalLM"]}, "InternVLChatModel"),
        ({"vision_config": None}, "malformed"),
    ],
)
def test_wrong_config_is_one_line(tiny_copy: Path, change: dict, message: str) -> None:
    _edit_config(tiny_copy, **change)
    with pytest.raises(EngineError, match=message) as err:
        open_checkpoint(str(tiny_copy))
    assert "\n" not in str(err.value)
    assert str(tiny_copy) in str(err.value)


@pytest.mark.parametrize(
    ("remove", "message"),
    [
        ("tokenizer.json", "tokenizer files missing: tokenizer.json"),
        ("model.safetensors", "no \\*.safetensors"),
        ("config.json", "config.json is missing"),
    ],
)
def test_missing_files_are_one_line(tiny_copy: Path, remove: str, message: str) -> None:
    (tiny_copy / remove).unlink()
    with pytest.raises(EngineError, match=message) as err:
        open_checkpoint(str(tiny_copy))
    assert "\n" not in str(err.value)


def test_corrupt_config_is_one_line(tiny_copy: Path) -> None:
    (tiny_copy / "config.json").write_text("{not json")
    with pytest.raises(EngineError, match="cannot read config.json"):
        open_checkpoint(str(tiny_copy))


def test_weights_that_do_not_fit_are_one_line(tiny_copy: Path) -> None:
    from safetensors.torch import load_file, save_file

    state = load_file(str(tiny_copy / "model.safetensors"))
    del state["language_model.model.norm.weight"]
    save_file(state, str(tiny_copy / "model.safetensors"))
    ckpt = open_checkpoint(str(tiny_copy))
    with pytest.raises(EngineError, match="weights missing.*language_model.model.norm.weight"):
        load_model(ckpt)
    _edit_config(tiny_copy, llm_config={**ckpt.config.llm, "hidden_size": 256})
    state["language_model.model.norm.weight"] = state["mlp1.3.bias"].clone()
    save_file(state, str(tiny_copy / "model.safetensors"))
    with pytest.raises(EngineError, match="weights do not fit config.json") as err:
        load_model(open_checkpoint(str(tiny_copy)))
    assert "\n" not in str(err.value)


def test_unreachable_hub_id_fails_clearly(tmp_path: Path) -> None:
    # A fresh process: huggingface_hub reads HF_HUB_OFFLINE and the cache folder at import.
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_HOME": str(tmp_path / "hf")}
    code = (
        "from hpdparse.hpd.checkpoint import open_checkpoint\n"
        "from hpdparse.errors import EngineError\n"
        "try:\n"
        "    open_checkpoint('PaddlePaddle/HPD-Parsing')\n"
        "except EngineError as e:\n"
        "    print(e)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        env=env,
        capture_output=True,
        text=True,
        timeout=PATIENCE_SECONDS,
    )
    lines = out.stdout.strip().splitlines()
    assert len(lines) == 1, out.stdout + out.stderr
    assert lines[0].startswith("model PaddlePaddle/HPD-Parsing: not found locally")


def test_hub_id_found_in_local_cache(tmp_path: Path) -> None:
    # What users get offline once the model is cached: the hub id resolves to the snapshot.
    snapshot = tmp_path / "hf" / "hub" / "models--acme--tiny-hpd" / "snapshots" / ("a" * 40)
    shutil.copytree(TINY, snapshot)
    refs = snapshot.parents[1] / "refs"
    refs.mkdir()
    (refs / "main").write_text("a" * 40)
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_HOME": str(tmp_path / "hf")}
    code = (
        "from hpdparse.hpd.checkpoint import open_checkpoint\n"
        "c = open_checkpoint('acme/tiny-hpd')\n"
        "print(c.revision, c.config.fork_token_id)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        env=env,
        capture_output=True,
        text=True,
        timeout=PATIENCE_SECONDS,
    )
    assert out.returncode == 0, out.stderr
    fork = json.loads((TINY / "config.json").read_text())["fork_token_id"]
    assert out.stdout.split() == ["a" * 40, str(fork)]
