"""The vLLM engine on the tiny checkpoint, checked against the PyTorch engine (the oracle).

Two checkpoints:
- ``tests/fixtures/tiny-hpd`` as it is: every sample page, fork and plain, must give exactly the
  torch engine's text.
- a "forking" copy of it, rewired into a next-token chain that forks every 47 tokens (decoder
  layers' output projections zeroed, so a logit depends only on the last token): every page then
  has several children, whatever the fixture's own weights do, which the prefix-cache and
  vision-encoder tests need; each child writes <FORK>s of its own (which must not fork) and runs
  into max_tokens. Its text is checked against the torch engine too.

Four engines: tiny-hpd fork and plain (shared with the other vLLM test modules, see conftest.py),
the forking checkpoint, and the forking checkpoint with a KV cache too small for the pages it is
given (admission control and preemption).
"""

from __future__ import annotations

import json
import os
import pickle
import shutil
import threading
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from PIL import Image

from tests.helpers.paths import FIXTURES
from tests.helpers.streaming import joined, run_streaming
from tests.helpers.vllm import (
    CHILD_RUN,
    CYCLE,
    MAX_TOKENS,
    PARENT_RUN,
    sample_pages,
    vllm_config,
    vllm_options,
    write_forking_checkpoint,
)

try:  # only an absent vllm skips; a vllm that is installed but broken fails the tests
    import vllm  # noqa: F401
except ImportError as exc:  # pragma: no cover - depends on the environment
    pytest.skip(f"vllm is not installed ({exc})", allow_module_level=True)

from hpdparse.engines import create_engine
from hpdparse.engines.base import CANCELLED, FINISH_LENGTH, FINISH_STOP, PageRequest
from hpdparse.engines.vllm import compat, host_memory
from hpdparse.engines.vllm.engine import CPU_BLOCK_SIZE, VllmEngine
from hpdparse.engines.vllm.options import WAITING_STEPS
from hpdparse.errors import EngineError

pytestmark = pytest.mark.vllm

TINY = FIXTURES / "tiny-hpd"


@pytest.fixture(scope="module")
def pages() -> list[tuple[tuple[str, int], Image.Image]]:
    return sample_pages()


@pytest.fixture(scope="module")
def forking_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_forking_checkpoint(tmp_path_factory.mktemp("forking") / "ckpt")


@pytest.fixture(scope="module")
def vllm_fork(vllm_engines) -> VllmEngine:
    return vllm_engines.get(vllm_config(TINY, fork=True))


@pytest.fixture(scope="module")
def vllm_plain(vllm_engines) -> VllmEngine:
    return vllm_engines.get(vllm_config(TINY, fork=False))


@pytest.fixture(scope="module")
def vllm_forking(forking_model: Path) -> Iterator[VllmEngine]:
    with VllmEngine(vllm_config(forking_model, fork=True), vllm_options()) as engine:
        yield engine


def _run(engine, pages, max_in_flight: int = 4) -> dict:
    prepare = engine.preparer()
    requests = (PageRequest(key, prepare(image)) for key, image in pages)
    results = {}
    for result in engine.run(requests, max_in_flight):
        assert result.key not in results, f"page {result.key} came back twice"
        results[result.key] = result
    return results


def _torch_texts(model: Path, fork: bool, pages, **overrides: object) -> dict:
    with create_engine("torch", vllm_config(model, fork=fork, **overrides)) as engine:
        return _texts(_run(engine, pages))


def _texts(results: dict) -> dict:
    return {k: (r.text, r.finish_reason) for k, r in results.items()}


@pytest.fixture(scope="module")
def torch_fork_streamed(pages) -> tuple[dict, dict]:
    """The torch engine's results and what it streamed through on_tokens, page by page."""
    with create_engine("torch", vllm_config(TINY, fork=True)) as engine:
        return run_streaming(engine, pages)


@pytest.fixture(scope="module")
def torch_plain_streamed(pages) -> tuple[dict, dict]:
    with create_engine("torch", vllm_config(TINY, fork=False)) as engine:
        return run_streaming(engine, pages)


@pytest.fixture(scope="module")
def torch_fork(torch_fork_streamed) -> dict:
    return _texts(torch_fork_streamed[0])


@pytest.fixture(scope="module")
def torch_plain(torch_plain_streamed) -> dict:
    return _texts(torch_plain_streamed[0])


@pytest.fixture(scope="module")
def torch_forking(forking_model: Path, pages) -> dict:
    return _torch_texts(forking_model, True, pages)


@pytest.fixture(scope="module")
def forking_results(vllm_forking: VllmEngine, pages) -> dict:
    before = vllm_forking.llm_engine.apply_model(lambda m: m.encoded_images)[0]
    results = _run(vllm_forking, pages)
    after = vllm_forking.llm_engine.apply_model(lambda m: m.encoded_images)[0]
    return {"results": results, "encoded_images": after - before}


# ------------------------------------------------------------------------- same text as torch


def _assert_same(vllm_results: dict, expected: dict) -> None:
    assert set(vllm_results) == set(expected)
    for key, (text, finish) in expected.items():
        got = vllm_results[key]
        assert got.text == text, f"page {key}: vLLM text differs from the torch engine's"
        assert got.finish_reason == finish, f"page {key}"


def test_fork_mode_gives_the_torch_engines_text(vllm_fork, torch_fork, pages) -> None:
    _assert_same(_run(vllm_fork, pages), torch_fork)


def test_on_a_cpu_the_engine_keeps_freed_memory(vllm_fork) -> None:
    # host_memory.py: the engine on a CPU asks for it (inherited by the processes vLLM starts),
    # and the plugin sets malloc so in this process.
    if not vllm_fork._on_cpu:
        pytest.skip("on a GPU malloc is left as it is")
    assert os.environ.get(host_memory.ENV) == "1"
    assert host_memory.applied()


def test_plain_mode_gives_the_torch_engines_text(vllm_plain, torch_plain, pages) -> None:
    results = _run(vllm_plain, pages)
    _assert_same(results, torch_plain)
    assert all(r.stats["forks"] == 0 for r in results.values())


def test_forking_pages_give_the_torch_engines_text(forking_results, torch_forking) -> None:
    results = forking_results["results"]
    _assert_same(results, torch_forking)
    for result in results.values():
        # parent: <BLOCK> + 40 + <FORK> + 5 repeated until max_tokens; each fork one child.
        forks = result.stats["forks"]
        assert forks == len(range(PARENT_RUN + 1, MAX_TOKENS, CYCLE))
        assert result.text.count("<CHILD>") == forks
        # Only the parent forks; each child keeps its own <FORK>s as text.
        assert result.text.count("<FORK>") == forks * len(range(CHILD_RUN, MAX_TOKENS, CYCLE))
        assert result.finish_reason == FINISH_LENGTH  # every branch ran into max_tokens
        assert result.stats["truncated_branches"] == forks + 1


# ----------------------------------------------------------------- streaming through on_tokens


@pytest.mark.parametrize("fork", [True, False], ids=["fork", "plain"])
def test_on_tokens_streams_the_ids_the_text_is_decoded_from(
    fork, vllm_fork, vllm_plain, torch_fork_streamed, torch_plain_streamed, pages
) -> None:
    engine = vllm_fork if fork else vllm_plain
    results, calls = run_streaming(engine, pages)
    _, torch_calls = torch_fork_streamed if fork else torch_plain_streamed
    assert set(results) == set(torch_calls)
    for key, result in results.items():
        streamed = joined(calls[key])
        assert engine.detokenize(streamed) == result.text, key
        assert len(streamed) == result.output_tokens, key
        # The very ids the torch engine streamed for the page (its text is the same).
        assert streamed == joined(torch_calls[key]), key
        assert 1 < len(calls[key]) <= result.stats["decoding_steps"], key


def test_on_tokens_streams_a_page_while_its_children_decode(
    vllm_forking, torch_forking, pages
) -> None:
    results, calls = run_streaming(vllm_forking, pages)
    for key, result in results.items():
        streamed = joined(calls[key])
        assert vllm_forking.detokenize(streamed) == result.text == torch_forking[key][0], key
        assert len(streamed) == result.output_tokens, key
        # The parent's first <FORK> is its token 41; its child runs MAX_TOKENS steps, one token
        # each, and the page streams it as it comes: a call per step at least until it ends.
        assert vllm_forking.detokenize(streamed[PARENT_RUN + 1 : PARENT_RUN + 2]) == "<CHILD>"
        assert len(calls[key]) >= MAX_TOKENS, key


# ------------------------------------------------------------------ prefix cache and encoder


def test_children_reuse_the_parent_kv_through_the_prefix_cache(forking_results) -> None:
    for key, result in forking_results["results"].items():
        forks = result.stats["forks"]
        cached = result.stats["cached_tokens"]
        child_prompts = result.stats["child_prompt_tokens"]
        assert forks > 0
        # Every full KV block a child shares with its parent is served from the cache (the
        # image, the prompt and the parent's decoded tokens): a child recomputes at most the
        # last, partial block of its prompt, the one holding <CHILD>.
        assert child_prompts - cached <= forks * CPU_BLOCK_SIZE, key
        # ... and decode blocks count: more than the prompt's own full blocks are reused.
        prompt_blocks = result.prompt_tokens // CPU_BLOCK_SIZE * CPU_BLOCK_SIZE
        assert cached > forks * prompt_blocks, key


def test_the_vision_encoder_runs_once_per_page(forking_results, pages) -> None:
    results = forking_results["results"]
    assert sum(r.stats["forks"] for r in results.values()) > len(pages)
    assert forking_results["encoded_images"] == len(pages)


def test_decoding_steps_with_forks_are_fewer_than_tokens(forking_results) -> None:
    for result in forking_results["results"].values():
        assert result.stats["decoding_steps"] < result.output_tokens


# --------------------------------------------------------------- streaming, many documents


def test_many_pages_from_several_documents_with_a_small_batch(
    vllm_forking, torch_forking, pages
) -> None:
    copies = 2
    pulled = 0
    results_seen_at: list[int] = []

    def requests():
        nonlocal pulled
        prepare = vllm_forking.preparer()
        for copy in range(copies):
            for key, image in pages:
                pulled += 1
                yield PageRequest((copy, *key), prepare(image))

    results = {}
    for result in vllm_forking.run(requests(), max_in_flight=2):
        results_seen_at.append(pulled)
        assert result.key not in results
        results[result.key] = result
    assert len(results) == copies * len(pages)
    for (_, *key), result in results.items():
        assert result.ok
        assert (result.text, result.finish_reason) == torch_forking[tuple(key)]
    # Pages are pulled as others finish, never all up front.
    assert results_seen_at[0] <= 2


def test_closing_a_run_early_leaves_no_request_behind(vllm_fork, pages) -> None:
    prepare = vllm_fork.preparer()
    run = vllm_fork.run((PageRequest(k, prepare(i)) for k, i in pages), 2)
    next(run)
    run.close()
    assert not vllm_fork.llm_engine.has_unfinished_requests()


def test_pages_over_the_token_limit_are_reported_as_length(vllm_fork, pages) -> None:
    key, image = pages[0]
    vllm_fork.config.max_tokens = 3
    try:
        (result,) = _run(vllm_fork, [(key, image)]).values()
    finally:
        vllm_fork.config.max_tokens = MAX_TOKENS
    assert result.finish_reason == FINISH_LENGTH
    assert result.stats["truncated_branches"] >= 1


def test_a_bad_payload_fails_only_its_page(vllm_fork, pages) -> None:
    prepare = vllm_fork.preparer()
    key, image = pages[0]
    bad = np.zeros((1, 5, 5, 3), dtype=np.uint8)
    out = {
        r.key: r
        for r in vllm_fork.run([PageRequest("bad", bad), PageRequest(key, prepare(image))], 2)
    }
    assert out["bad"].finish_reason == "error" and "HPD tiles" in out["bad"].error
    assert out[key].finish_reason in (FINISH_STOP, FINISH_LENGTH)


def test_preparer_is_picklable_and_makes_uint8_tiles(vllm_fork, pages) -> None:
    prepare = pickle.loads(pickle.dumps(vllm_fork.preparer()))
    grey = pages[0][1]
    colour = grey.copy()
    colour.paste((200, 30, 30), (10, 10, 60, 60))
    for image, channels in ((grey, 1), (colour, 3)):  # a grey page travels as one channel
        tiles = prepare(image)
        assert tiles.dtype == np.uint8 and tiles.ndim == 4 and tiles.shape[-1] == channels


def test_engine_info(vllm_fork, vllm_plain) -> None:
    assert vllm_fork.info.engine == "vllm"
    assert vllm_fork.info.prompt != vllm_plain.info.prompt
    assert vllm_fork.info.max_tokens == MAX_TOKENS


# ------------------------------------------- admission control: a KV cache too small for the pages

# ~218 KV blocks of 32 tokens: the prompts of ~50 forking pages fit, their outputs do not, so vLLM
# preempts; a run of TIGHT_PAGES pages cannot all be running at once (with admission control at
# most 42 pages were in the engine at a time on vLLM 0.32, the same at 64 or 96 pages).
TIGHT_KV_GIB = 0.01
TIGHT_PAGES = 72


@pytest.fixture(scope="module")
def vllm_tight(forking_model: Path) -> Iterator[VllmEngine]:
    with VllmEngine(
        vllm_config(forking_model, fork=True), vllm_options(kv_cache_gib=TIGHT_KV_GIB)
    ) as engine:
        yield engine


def _scheduler(engine: VllmEngine) -> Any:
    return engine.llm_engine.engine_core.engine_core.scheduler


def _scheduler_counts(engine: VllmEngine) -> tuple[int, int]:
    """(running, waiting) requests in the in-process vLLM scheduler."""
    return _scheduler(engine).get_request_counts()


class _PullLog:
    """Wraps the request iterator (the engine's input boundary) and records, at every pull, how
    many pages were in the engine and what vLLM's scheduler held."""

    def __init__(self, engine: VllmEngine, pages, count: int) -> None:
        self.engine, self.pages, self.count = engine, pages, count
        self.pulled = 0
        self.returned = 0
        # (pages in flight incl. this, running requests, prompt tokens waiting)
        self.at_pull: list[tuple[int, int, int]] = []

    def requests(self) -> Iterator[PageRequest]:
        prepare = self.engine.preparer()
        payloads = [prepare(image) for _, image in self.pages]
        for n in range(self.count):
            index = n % len(self.pages)
            # A distinct image per page (two pixels changed), so no page shares another's prefix
            # blocks; the forking model's text does not depend on the image.
            payload = payloads[index].copy()
            payload[0, 0, 0, 0], payload[0, 0, 1, 0] = n % 256, n // 256
            running, _ = _scheduler_counts(self.engine)
            _, waiting_tokens = compat.waiting_requests(_scheduler(self.engine))
            self.pulled += 1
            self.at_pull.append((self.pulled - self.returned, running, waiting_tokens))
            yield PageRequest((n, *self.pages[index][0]), payload)

    def run(self, max_in_flight: int) -> Iterator:
        for result in self.engine.run(self.requests(), max_in_flight):
            self.returned += 1
            yield result


def _assert_forking_texts(results: dict, count: int, torch_forking: dict) -> None:
    assert len(results) == count
    for (_, *key), result in results.items():
        assert (result.text, result.finish_reason) == torch_forking[tuple(key)], key


def test_pages_are_pulled_only_while_few_tokens_wait(vllm_tight, torch_forking, pages) -> None:
    # By default two steps' prompt tokens may wait; the tiny pages are so small that all of
    # them would, so this run lets none wait: a page is pulled only when vLLM has none waiting.
    budget = WAITING_STEPS * _scheduler(vllm_tight).scheduler_config.max_num_batched_tokens
    assert vllm_tight.admission().max_waiting_tokens == budget
    vllm_tight.options.max_waiting_tokens = 1
    try:
        log = _PullLog(vllm_tight, pages, TIGHT_PAGES)
        results = {r.key: r for r in log.run(max_in_flight=512)}
    finally:
        vllm_tight.options.max_waiting_tokens = None
    _assert_forking_texts(results, TIGHT_PAGES, torch_forking)
    assert all(waiting_tokens == 0 for _, _, waiting_tokens in log.at_pull)
    # max_in_flight=512 is not what bounds it: pages came back before the last one was pulled.
    assert max(in_flight for in_flight, _, _ in log.at_pull) < TIGHT_PAGES - 16


def test_without_admission_every_page_queues_and_preemption_keeps_the_text(
    vllm_tight, torch_forking, pages
) -> None:
    # No admission limit: max_in_flight only, every page enters vLLM before the first step. The
    # small KV cache makes vLLM preempt children whose image is in the prefix cache; before the
    # vLLM workaround (compat.keep_image_data_on_the_worker; 0.29+) this stopped the run with
    # "Encoder cache miss" (on vLLM 0.32 it passes without the workaround, at 30 pages or 60).
    count = 30  # vLLM 0.32 preempts 80 times in this run (170 times at 60 pages)
    vllm_tight.options.max_waiting_tokens = 10**9
    try:
        log = _PullLog(vllm_tight, pages, count)
        results = {r.key: r for r in log.run(max_in_flight=512)}
    finally:
        vllm_tight.options.max_waiting_tokens = None
    _assert_forking_texts(results, count, torch_forking)
    assert [in_flight for in_flight, _, _ in log.at_pull] == list(range(1, count + 1))


def test_a_fork_as_the_last_allowed_token_leaves_an_empty_child(
    vllm_forking, forking_results, pages
) -> None:
    """The parent's last token within max_model_len is a <FORK>: its child has no room (vLLM
    refuses a request whose prompt fills max_model_len); the page ends as length, same text as
    the torch engine."""
    key, image = pages[0]
    prompt = forking_results["results"][key].prompt_tokens
    config = vllm_forking.config
    started_with = config.max_model_len
    # The parent writes <FORK> as its tokens 41, 88, ...: make token 88 its last allowed one.
    # A run takes max_model_len from the config (the engine's own stays larger: a child sent
    # to it would decode a token instead of failing, and its text would differ from torch's).
    limit = prompt + 41 + CYCLE + 1
    config.max_model_len = limit
    try:
        [result] = _run(vllm_forking, [(key, image)]).values()
    finally:
        config.max_model_len = started_with
    with create_engine("torch", replace(config, max_model_len=limit)) as engine:
        [expected] = _run(engine, [(key, image)]).values()
    assert result.finish_reason == FINISH_LENGTH and result.error is None
    assert result.stats["forks"] == 2 and result.stats["parent_tokens"] == 41 + CYCLE + 1
    assert (result.text, result.finish_reason) == (expected.text, expected.finish_reason)
    assert result.text.endswith("<CHILD>")


def test_cpu_binding_one_list_per_tensor_parallel_rank(monkeypatch: pytest.MonkeyPatch) -> None:
    from hpdparse.engines.vllm import engine as vllm_engine

    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1, 2, 3, 4})
    monkeypatch.delenv("VLLM_CPU_OMP_THREADS_BIND", raising=False)
    monkeypatch.setattr(vllm_engine, "_cpu_bind_we_set", None)
    vllm_engine._apply_cpu_settings()
    assert os.environ["VLLM_CPU_OMP_THREADS_BIND"] == "0,1,2,3,4"
    vllm_engine._apply_cpu_settings(2)  # our own earlier value is replaced
    assert os.environ["VLLM_CPU_OMP_THREADS_BIND"] == "0,1|2,3,4"
    vllm_engine._apply_cpu_settings(8)
    assert os.environ["VLLM_CPU_OMP_THREADS_BIND"] == "nobind"
    monkeypatch.setenv("VLLM_CPU_OMP_THREADS_BIND", "0-1|2-3")  # the user's own is kept
    vllm_engine._apply_cpu_settings(4)
    assert os.environ["VLLM_CPU_OMP_THREADS_BIND"] == "0-1|2-3"


def test_unknown_engine_option_is_one_line_before_loading() -> None:
    engine = VllmEngine(vllm_config(TINY, fork=True), vllm_options(kv_cache_gb=1, max_num_seqs=8))
    with pytest.raises(EngineError) as caught:
        engine.start()
    assert str(caught.value) == (
        "vllm engine: unknown engine option kv_cache_gb; it takes vLLM EngineArgs fields, "
        "engine_core, kv_cache_gib, logprobs, max_waiting and max_waiting_tokens"
    )
    assert engine._llm is None


# ------------------------------------------------------------------------ model folder errors


def _broken_copy(tmp_path: Path, edit) -> Path:
    folder = tmp_path / "model"
    shutil.copytree(TINY, folder)
    edit(folder)
    return folder


def _set_config(folder: Path, **changes: object) -> None:
    config = json.loads((folder / "config.json").read_text())
    config.update(changes)
    (folder / "config.json").write_text(json.dumps(config))


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda f: (f / "config.json").unlink(), "config.json is missing"),
        (lambda f: (f / "tokenizer.json").unlink(), "tokenizer"),
        (lambda f: (f / "model.safetensors").unlink(), "safetensors"),
        (lambda f: _set_config(f, architectures=["LlamaForCausalLM"]), "architectures"),
    ],
    ids=["no-config", "no-tokenizer", "no-weights", "wrong-architecture"],
)
def test_model_folder_errors_are_one_line(tmp_path: Path, edit, message: str) -> None:
    folder = _broken_copy(tmp_path, edit)
    engine = VllmEngine(vllm_config(folder, fork=True), vllm_options())
    with pytest.raises(EngineError) as info:
        engine.start()
    assert message in str(info.value) and "\n" not in str(info.value)


def test_missing_folder_is_one_line(tmp_path: Path) -> None:
    with pytest.raises(EngineError, match="no such folder"):
        VllmEngine(vllm_config(tmp_path / "absent", fork=True), vllm_options()).start()


def test_weights_that_do_not_fit_the_config_are_one_line(tmp_path: Path) -> None:
    from safetensors.torch import load_file, save_file

    def drop_a_weight(folder: Path) -> None:
        weights = load_file(str(folder / "model.safetensors"))
        del weights["mlp1.1.weight"]
        save_file(weights, str(folder / "model.safetensors"))

    folder = _broken_copy(tmp_path, drop_a_weight)
    with pytest.raises(EngineError) as info:
        VllmEngine(vllm_config(folder, fork=True), vllm_options()).start()
    assert "cannot start model" in str(info.value) and "\n" not in str(info.value)


def _live_source(engine, pages, seen: list) -> Iterator[PageRequest | None]:
    """A server-like source: None first and between pages; before each page after the first,
    None until the previous page's result is back (the engine must keep decoding meanwhile)."""
    prepare = engine.preparer()
    yield None  # nothing in flight: the engine must ask again, not stop or fail
    for number, (key, image) in enumerate(pages):
        nones = 0
        while len(seen) < number - 1:  # keep one page ahead
            nones += 1
            assert nones < 100_000, "the engine stopped decoding while the source said None"
            yield None
        yield PageRequest(key, prepare(image))
        yield None


def test_a_live_source_yielding_none_gives_the_same_texts(vllm_fork, torch_fork, pages) -> None:
    seen: list = []
    results = {}
    for result in vllm_fork.run(_live_source(vllm_fork, pages, seen), max_in_flight=4):
        seen.append(result.key)
        results[result.key] = result
    _assert_same(results, torch_fork)


# ------------------------------------------------------------ cancelling, per-page token limit


def test_a_cancelled_page_frees_its_vllm_requests_at_once(
    vllm_forking, torch_forking, pages
) -> None:
    """PageRequest.cancel set while the page's parent and a child decode: the page's vLLM
    requests are aborted at the next step and it comes back cancelled; the engine goes on."""
    llm = vllm_forking.llm_engine
    prepare = vllm_forking.preparer()
    (key, image), (other, other_image) = pages[0], pages[1]
    cancel = threading.Event()
    branches_at_cancel = 0

    def live():
        nonlocal branches_at_cancel
        yield PageRequest(key, prepare(image), cancel=cancel)
        for _ in range(400):  # one step per None, until a child decodes beside the parent
            if llm.get_num_unfinished_requests() >= 2:
                break
            yield None
        branches_at_cancel = llm.get_num_unfinished_requests()
        cancel.set()
        yield None
        yield PageRequest(other, prepare(other_image))

    results = []
    for result in vllm_forking.run(live(), max_in_flight=4):
        if result.key == key:
            assert not llm.has_unfinished_requests(), "the cancelled page's requests remain"
        results.append(result)
    assert branches_at_cancel >= 2
    assert [r.key for r in results] == [key, other]
    assert results[0].finish_reason == "error" and results[0].error == CANCELLED
    assert (results[1].text, results[1].finish_reason) == torch_forking[other]


def test_a_request_may_lower_the_token_limit(vllm_fork, pages) -> None:
    limited = _torch_texts(TINY, True, pages[:1], max_tokens=5)
    prepare = vllm_fork.preparer()
    key, image = pages[0]
    requests = [PageRequest(key, prepare(image), max_tokens=5), PageRequest("more", prepare(image))]
    results = {r.key: r for r in vllm_fork.run(requests, max_in_flight=2)}
    assert (results[key].text, results[key].finish_reason) == limited[key]
    assert results[key].finish_reason == FINISH_LENGTH
    assert results[key].stats["parent_tokens"] == 5
    assert len(results["more"].text) > len(results[key].text)
