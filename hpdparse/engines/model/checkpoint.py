"""Find an HPD checkpoint (local folder or hub id), check its layout, and load it for PyTorch.

A hub id goes through huggingface_hub's `snapshot_download`, which honours HF_HUB_OFFLINE and the
local cache, exactly as users expect from other Hugging Face tools. Every failure is an EngineError
with a one-line message naming the checkpoint and what is wrong.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hpdparse.engines.model.config import ARCHITECTURE, HpdModelConfig
from hpdparse.errors import EngineError

TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json")
WEIGHT_PATTERNS = ("*.safetensors", "*.safetensors.index.json")
DOWNLOAD_PATTERNS = [
    "*.json",
    "*.safetensors",
    "*.py",
    "*.txt",
    "*.model",
    "*.jinja",
]


@dataclass(frozen=True)
class Checkpoint:
    """A checked checkpoint folder: its config and where its files are."""

    path: Path
    model_id: str  # what the user gave (hub id or folder)
    revision: str | None  # the hub commit when known
    config: HpdModelConfig

    @property
    def raw_config(self) -> dict[str, Any]:
        return self.config.raw

    def tokenizer_config(self) -> dict[str, Any]:
        return _read_json(self.path / "tokenizer_config.json", self.model_id)


def _read_json(path: Path, model_id: str) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise EngineError(f"model {model_id}: {path.name} is missing") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise EngineError(f"model {model_id}: cannot read {path.name}: {exc}") from None
    if not isinstance(data, dict):
        raise EngineError(f"model {model_id}: {path.name} is not a JSON object")
    return data


def _looks_like_path(model: str) -> bool:
    return model.startswith((".", "/", "~")) or Path(model).expanduser().exists()


def resolve(model: str, revision: str | None = None) -> tuple[Path, str | None]:
    """A local folder, or a hub id fetched into (or found in) the Hugging Face cache."""
    if _looks_like_path(model):
        path = Path(model).expanduser()
        if not path.is_dir():
            raise EngineError(f"model {model}: no such folder")
        return path.resolve(), revision
    if model.count("/") != 1 or any(not part for part in model.split("/")):
        raise EngineError(f"model {model}: not a folder and not a hub id (owner/name)")
    try:
        from huggingface_hub import snapshot_download
    except ImportError:
        raise EngineError(
            f"model {model}: huggingface_hub is not installed (pip install 'hpdparse[torch]')"
        ) from None
    try:
        folder = snapshot_download(model, revision=revision, allow_patterns=DOWNLOAD_PATTERNS)
    except Exception as exc:  # the hub client raises many types (offline, 401, 404, network)
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise EngineError(
            f"model {model}: not found locally and could not be downloaded "
            f"({type(exc).__name__}: {reason[:200]})"
        ) from None
    path = Path(folder)
    commit = path.name if len(path.name) == 40 else revision
    return path, commit


def check_layout(path: Path, model_id: str) -> HpdModelConfig:
    """Validate the folder: config.json of an HPD InternVLChatModel, tokenizer, safetensors."""
    raw = _read_json(path / "config.json", model_id)
    archs = raw.get("architectures") or []
    if ARCHITECTURE not in archs:
        raise EngineError(
            f"model {model_id}: config.json architectures {archs} do not include {ARCHITECTURE}"
        )
    if "fork_token_id" not in raw or "child_token_id" not in raw:
        raise EngineError(
            f"model {model_id}: config.json has no fork_token_id/child_token_id: "
            "a stock InternVL checkpoint, not HPD-Parsing"
        )
    llm_archs = (raw.get("llm_config") or {}).get("architectures") or []
    if "Qwen3ForCausalLM" not in llm_archs:
        raise EngineError(
            f"model {model_id}: llm_config architectures {llm_archs} are not Qwen3ForCausalLM"
        )
    try:
        config = HpdModelConfig.from_dict(raw)
    except (KeyError, TypeError, ValueError) as exc:
        raise EngineError(f"model {model_id}: config.json is malformed ({exc!r})") from None
    missing = [name for name in TOKENIZER_FILES if not (path / name).is_file()]
    if missing:
        raise EngineError(f"model {model_id}: tokenizer files missing: {', '.join(missing)}")
    if not any(any(path.glob(p)) for p in WEIGHT_PATTERNS):
        raise EngineError(f"model {model_id}: no *.safetensors weights in {path}")
    return config


def open_checkpoint(model: str, revision: str | None = None) -> Checkpoint:
    """Resolve and validate; reads only JSON, so it is cheap (the weights load later)."""
    path, commit = resolve(model, revision)
    config = check_layout(path, model)
    return Checkpoint(path=path, model_id=model, revision=commit, config=config)


def load_state_dict(ckpt: Checkpoint) -> dict[str, Any]:
    """Every tensor of the checkpoint's safetensors files (single file or sharded)."""
    from safetensors import SafetensorError
    from safetensors.torch import load_file

    files = sorted(ckpt.path.glob("*.safetensors"))
    state: dict[str, Any] = {}
    for f in files:
        try:
            state.update(load_file(str(f)))
        except (OSError, SafetensorError) as exc:
            raise EngineError(f"model {ckpt.model_id}: cannot read {f.name}: {exc}") from None
    return state


def load_model(ckpt: Checkpoint, device: str = "cpu", dtype: Any = None) -> Any:
    """Build HpdModel and load its weights; the P-MTP head is optional in the files."""
    import torch

    from hpdparse.engines.model.modeling import HpdModel

    state = load_state_dict(ckpt)
    has_mtp = any(k.startswith("language_model.mtp.") for k in state)
    with torch.device("meta"):
        model = HpdModel(ckpt.config, with_mtp=has_mtp)
    expected = set(model.state_dict())
    missing = sorted(expected - set(state))
    if missing:
        raise EngineError(
            f"model {ckpt.model_id}: weights missing from safetensors: {', '.join(missing[:3])}"
            + (f" (+{len(missing) - 3} more)" if len(missing) > 3 else "")
        )
    unexpected = sorted(set(state) - expected)
    if unexpected:
        raise EngineError(
            f"model {ckpt.model_id}: unexpected weights in safetensors: {', '.join(unexpected[:3])}"
        )
    dtype = dtype or torch.float32
    state = {k: v.to(dtype) for k, v in state.items()}
    try:
        model.load_state_dict(state, strict=True, assign=True)
    except RuntimeError as exc:
        first = str(exc).strip().splitlines()
        detail = " ".join(line.strip() for line in first[1:3]) or first[0]
        raise EngineError(
            f"model {ckpt.model_id}: weights do not fit config.json: {detail}"
        ) from None
    # The rotary inverse frequencies (a buffer, not in the files) were made on "meta": rebuild
    # them, in float32 whatever the weights' dtype.
    rotary = model.language_model.model.rotary_emb
    model.language_model.model.rotary_emb = type(rotary)(config=model.language_model.config)
    return model.to(device=device).eval()
