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

from hpdparse.errors import EngineError
from hpdparse.hpd.model_config import ARCHITECTURE, HpdModelConfig

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

    def chat_template(self) -> str | None:
        """tokenizer_config.json's chat template (read on each call)."""
        return _read_json(self.path / "tokenizer_config.json", self.model_id).get("chat_template")


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


def resolve(model: str, revision: str | None = None) -> tuple[Path, str | None]:
    """A local folder, or a hub id fetched into (or found in) the Hugging Face cache."""
    if model.startswith((".", "/", "~")) or Path(model).expanduser().exists():  # a path
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
