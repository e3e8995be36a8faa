"""HPD decoding on the tiny trained checkpoint: every schedule, with and without P-MTP, gives the
same text page by page, and that text is the sample pages' ground truth."""

from __future__ import annotations

from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from hpdparse.engines.options import EngineConfig  # noqa: E402
from hpdparse.engines.torch.decoding import HpdDecoder, PageJob  # noqa: E402
from hpdparse.engines.torch.loading import load_model  # noqa: E402
from hpdparse.hpd.checkpoint import open_checkpoint  # noqa: E402
from hpdparse.hpd.prompt import PromptBuilder, load_tokenizer, token_ids  # noqa: E402
from hpdparse.hpd.tiling import normalize_torch, tile_image  # noqa: E402
from hpdparse.sources.open import open_source  # noqa: E402
from tests.tinymodel.synth import load_ground_truth  # noqa: E402

REPO = Path(__file__).resolve().parents[3]
TINY = REPO / "tests" / "fixtures" / "tiny-hpd"
STREAMS = REPO / "tests" / "fixtures" / "streams"
SAMPLES = REPO / "samples"

NO_MTP = EngineConfig(mtp=False)
RUNS = {  # the decoder's settings and schedule
    "plain": (EngineConfig(fork=False, mtp=False), "concurrent"),
    "plain+mtp": (EngineConfig(fork=False), "concurrent"),
    "serial": (NO_MTP, "serial"),
    "serial+mtp": (EngineConfig(), "serial"),
    "concurrent": (NO_MTP, "concurrent"),
    "concurrent+mtp": (EngineConfig(), "concurrent"),
    "concurrent+mtp2": (EngineConfig(speculative_tokens=2), "concurrent"),
}


def sample_image(stem: str, page: int):
    path = SAMPLES / f"{stem}.pdf"
    if not path.is_file():
        path = SAMPLES / f"{stem}.png"
    with open_source(path) as doc:
        return doc.rasterize(page, 200)[0]


class Tiny:
    def __init__(self) -> None:
        torch.set_num_threads(1)
        self.ckpt = open_checkpoint(str(TINY))
        self.model = load_model(self.ckpt)
        self.tok = load_tokenizer(self.ckpt.path, str(TINY))
        self.ids = token_ids(self.tok, self.ckpt.config, str(TINY))
        template = self.ckpt.chat_template()
        self.prompts = PromptBuilder(self.tok, self.ids, template)
        self.tiling = self.ckpt.config.tiling
        self.truth = load_ground_truth(STREAMS)
        self.features = {}
        with torch.no_grad():
            for key in sorted(self.truth):
                tiles = tile_image(sample_image(*key), self.tiling)
                f = self.model.image_features(normalize_torch(tiles, self.tiling))
                self.features[key] = f.reshape(-1, f.shape[-1])

    def jobs(self, fork: bool) -> list[PageJob]:
        return [
            PageJob(key, self.prompts.build(f.shape[0], fork), f)
            for key, f in self.features.items()
        ]

    def decode(self, config: EngineConfig, schedule: str) -> dict:
        out = {}
        decoder = HpdDecoder(self.model, self.ids, config, schedule)
        for r in decoder.decode(self.jobs(config.fork)):
            out[r.key] = (self.tok.decode(r.token_ids, skip_special_tokens=False), r)
        return out


@pytest.fixture(scope="module")
def tiny() -> Tiny:
    if not (SAMPLES / "report.pdf").is_file():
        pytest.skip("samples/ not generated")
    return Tiny()


@pytest.fixture(scope="module")
def runs(tiny: Tiny) -> dict:
    return {name: tiny.decode(*run) for name, run in RUNS.items()}


def test_every_schedule_gives_the_same_text(runs: dict, tiny: Tiny) -> None:
    for key in tiny.truth:
        texts = {name: run[key][0] for name, run in runs.items()}
        assert len(set(texts.values())) == 1, (key, texts)


def test_tiny_model_reproduces_its_sample_pages(runs: dict, tiny: Tiny) -> None:
    for name, run in runs.items():
        for key, stream in tiny.truth.items():
            assert run[key][0] == stream, (name, key)
            assert run[key][1].finish_reason == "stop"


def test_forks_follow_the_blocks_with_content(runs: dict, tiny: Tiny) -> None:
    for key, stream in tiny.truth.items():
        stats = runs["concurrent"][key][1].stats
        assert stats["forks"] == stream.count("<CHILD>")
        assert runs["plain"][key][1].stats["forks"] == 0
        total = stats["parent_tokens"] + stats["child_tokens"]
        plain = runs["plain"][key][1].stats["parent_tokens"]
        assert total == plain  # the same tokens, <FORK> standing for each <CHILD>


def test_concurrent_forks_take_fewer_steps(runs: dict, tiny: Tiny) -> None:
    def steps(name: str) -> int:
        return sum(r.stats["decoding_steps"] for _, r in runs[name].values())

    # On these pages the parent (block headers with boxes) is the longest branch, so the
    # gain is modest (about 1.5x); on text-heavy pages it is far larger.
    assert steps("concurrent") < 0.8 * steps("serial")
    assert steps("concurrent") < 0.8 * steps("plain")
    assert steps("concurrent+mtp") < steps("concurrent")
    assert steps("serial+mtp") < steps("serial")


def test_pmtp_drafts_are_accepted(runs: dict) -> None:
    for name in ("plain+mtp", "serial+mtp", "concurrent+mtp", "concurrent+mtp2"):
        drafted = sum(r.stats["drafted_tokens"] for _, r in runs[name].values())
        accepted = sum(r.stats["accepted_tokens"] for _, r in runs[name].values())
        assert 0 < accepted <= drafted, name
    for _, r in runs["concurrent"].values():
        assert r.stats["drafted_tokens"] == 0


def test_children_share_the_parent_cache(tiny: Tiny) -> None:
    decoder = HpdDecoder(tiny.model, tiny.ids, NO_MTP)
    key = ("report", 1)
    page = decoder.new_page(tiny.jobs(True)[sorted(tiny.features).index(key)])
    while not page.children:
        decoder.step([page])
    child = page.children[0]
    # The child's prefix is the parent's own storage, not a copy.
    assert child.prefix[-1][0] is page.parent.own
    assert child.length == sum(n for _, n in child.prefix)
    while not page.done:
        decoder.step([page])
    text = tiny.tok.decode(decoder.result(page).token_ids, skip_special_tokens=False)
    assert text == tiny.truth[key]


def test_max_tokens_cuts_every_branch(tiny: Tiny) -> None:
    job = tiny.jobs(True)[:1]
    r = HpdDecoder(tiny.model, tiny.ids, EngineConfig(mtp=False, max_tokens=12)).decode(job)[0]
    assert r.finish_reason == "length"
    assert r.stats["parent_tokens"] == 12
    r = HpdDecoder(tiny.model, tiny.ids, EngineConfig(max_tokens=12)).decode(job)[0]
    assert r.finish_reason == "length"
    assert r.stats["parent_tokens"] == 12


def test_prompt_is_internvl_chat_format(tiny: Tiny) -> None:
    ids = tiny.prompts.build(3, fork=True)
    text = tiny.tok.decode(ids, skip_special_tokens=False)
    assert text.startswith("<|im_start|>system\n")
    assert text.endswith(
        "<|im_start|>user\n<img>"
        + "<IMG_CONTEXT>" * 3
        + "</img>\ndocument parsing with fork.<|im_end|>\n<|im_start|>assistant\n"
    )
