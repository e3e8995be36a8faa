"""Loading a checkpoint's weights into the PyTorch model (HpdModel), P-MTP head included when
the files have it."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from hpdparse.errors import EngineError
from hpdparse.hpd.checkpoint import Checkpoint

if TYPE_CHECKING:
    import torch


def load_state_dict(ckpt: Checkpoint) -> dict[str, torch.Tensor]:
    """Every tensor of the checkpoint's safetensors files (single file or sharded)."""
    from safetensors import SafetensorError
    from safetensors.torch import load_file

    state: dict[str, torch.Tensor] = {}
    for f in sorted(ckpt.path.glob("*.safetensors")):
        try:
            state.update(load_file(str(f)))
        except (OSError, SafetensorError) as exc:
            raise EngineError(f"model {ckpt.model_id}: cannot read {f.name}: {exc}") from None
    return state


def load_model(ckpt: Checkpoint, device: str = "cpu", dtype: Any = None) -> Any:
    """Build HpdModel and load its weights; the P-MTP head is optional in the files."""
    import torch

    from hpdparse.engines.torch.modeling import HpdModel

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
