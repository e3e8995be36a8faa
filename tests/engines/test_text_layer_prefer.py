"""`--text-layer prefer` (hpdparse/engines/text_layer.py and the runner): children of text blocks
answered from the PDF's text, on the tiny checkpoint, whose pages of the samples are their
ground truth: the Markdown and raw pages stay the same while fewer child tokens are decoded;
resume keeps prefer and off pages apart, `render` needs no model; openai and --no-fork verify."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from hpdparse import api
from hpdparse.engines import EngineConfig, create_engine
from hpdparse.engines.text_layer import file_answers
from hpdparse.hpd.model_config import HpdModelConfig
from hpdparse.hpd.prompt import load_tokenizer, token_ids
from hpdparse.markdown.render import RenderOptions
from hpdparse.runner.progress import Progress
from hpdparse.runner.settings import ConvertSettings, text_layer_info
from hpdparse.sources.text_layer import read_page_texts
from tests.helpers.paths import REPO

TINY = REPO / "tests" / "fixtures" / "tiny-hpd"
SAMPLES = REPO / "samples"
GOLDEN = REPO / "tests" / "markdown" / "golden" / "synth"
STREAMS = REPO / "tests" / "fixtures" / "streams"


def tokenizer_and_ids():
    tokenizer = load_tokenizer(TINY, "tiny")
    config = json.loads((TINY / "config.json").read_text(encoding="utf-8"))
    return tokenizer, token_ids(tokenizer, HpdModelConfig.from_dict(config), "tiny")


def header(tokenizer, ids, text: str) -> list[int]:
    """The parent's tokens before a <FORK>: some earlier block, then <BLOCK> and `text`."""
    return [ids.block, *tokenizer.encode("text [1, 2, 3, 4]", add_special_tokens=False).ids] + [
        ids.child,
        ids.block,
        *tokenizer.encode(text, add_special_tokens=False).ids,
    ]


def test_text_blocks_are_answered_with_the_file_text_others_are_decoded() -> None:
    tokenizer, ids = tokenizer_and_ids()
    page = read_page_texts(SAMPLES / "paper.pdf", [1])[1]
    answers = file_answers(page, tokenizer, ids, forks=True)
    # paper.pdf page 1: "<BLOCK>doc_title [276, 75, 724, 108]<CHILD>A Small Study of Layout Models"
    tokens = answers(header(tokenizer, ids, "doc_title [276, 75, 724, 108]"))
    assert tokenizer.decode(tokens) == "A Small Study of Layout Models"
    assert answers(header(tokenizer, ids, "table [516, 258, 893, 346]")) is None
    assert answers(header(tokenizer, ids, "equation [249, 252, 324, 270]")) is None
    assert answers(header(tokenizer, ids, "text [0, 500, 60, 560]")) is None  # no text there
    assert answers(header(tokenizer, ids, "text")) is None  # no box
    assert answers([]) is None  # content before the first <BLOCK>
    assert file_answers(page, tokenizer, ids, forks=False) is None
    assert file_answers(None, tokenizer, ids, forks=True) is None


def convert(inputs: list[Path], out: Path, mode: str, **kw):
    return api.convert(
        inputs,
        out,
        engine="torch",
        model=str(TINY),
        dpi=200,
        workers=1,
        render_options=RenderOptions(text_layer=mode),
        progress=Progress(),
        **kw,
    )


def raw_meta(out: Path, stem: str) -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted((out / stem / "raw").glob("page-*.json"))]


def test_prefer_on_torch_gives_the_same_output_with_fewer_decoded_tokens(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("torch")
    import hpdparse.runner.finish as finish

    read_at_finish: list[list[int]] = []
    read = finish.read_page_texts
    monkeypatch.setattr(
        finish,
        "read_page_texts",
        lambda path, numbers: read_at_finish.append(list(numbers)) or read(path, numbers),
    )
    out = tmp_path / "out"
    stems = ["paper", "memo"]
    report = convert([SAMPLES / f"{s}.pdf" for s in stems], out, "prefer")
    assert report.exit_code == 0
    # Each page's text was read once, by its rasterizer, and checked with it at the finish.
    assert read_at_finish == []
    for stem in stems:
        data = json.loads((out / stem / f"{stem}.json").read_text(encoding="utf-8"))
        assert all(p["text_layer"]["disagree"] == 0 for p in data["pages"])
    for stem in stems:
        expected = (GOLDEN / stem / "expected.md").read_text(encoding="utf-8")
        assert (out / stem / f"{stem}.md").read_text(encoding="utf-8") == expected
        for raw in sorted((STREAMS / stem).glob("page-*.txt")):
            assert (out / stem / "raw" / raw.name).read_text(encoding="utf-8") == raw.read_text()
        for meta in raw_meta(out, stem):
            assert meta["reuse_key"]["text_layer"] == "prefer"
            stats = meta["stats"]
            assert 0 < stats["file_children"] <= stats["forks"]
            assert 0 < stats["file_tokens"] <= stats["child_tokens"]
    # Resume: the prefer pages are reused by prefer (nothing decoded), not by off.
    assert convert([SAMPLES / "memo.pdf"], out, "prefer").documents[0].status == "skipped"
    again = convert([SAMPLES / "memo.pdf"], out, "off")
    assert again.documents[0].pages_decoded == 1 and again.documents[0].pages_reused == 0
    (meta,) = raw_meta(out, "memo")
    assert "text_layer" not in meta["reuse_key"] and "file_children" not in meta["stats"]
    # render rebuilds from the raw pages without a model.
    (out / "paper" / "paper.md").unlink()
    rendered = api.render([out / "paper"], progress=Progress())
    assert rendered.exit_code == 0
    expected = (GOLDEN / "paper" / "expected.md").read_text(encoding="utf-8")
    assert (out / "paper" / "paper.md").read_text(encoding="utf-8") == expected
    data = json.loads((out / "paper" / "paper.json").read_text(encoding="utf-8"))
    assert all(p["text_layer"]["disagree"] == 0 for p in data["pages"])


def test_prefer_on_vllm_gives_the_same_markdown_with_answered_children(tmp_path: Path) -> None:
    pytest.importorskip("vllm")
    out = tmp_path / "out"
    cmd = [sys.executable, "-m", "hpdparse", "convert", str(SAMPLES / "memo.pdf"), "-o", str(out)]
    cmd += ["--engine", "vllm", "--model", str(TINY), "--text-layer", "prefer"]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=900, env=env, check=False)
    assert proc.returncode == 0, proc.stderr
    expected = (GOLDEN / "memo" / "expected.md").read_text(encoding="utf-8")
    assert (out / "memo" / "memo.md").read_text(encoding="utf-8") == expected
    (meta,) = raw_meta(out, "memo")
    assert meta["reuse_key"]["text_layer"] == "prefer"
    assert meta["stats"]["file_children"] == 7  # every block of the memo is text
    summary = proc.stdout + proc.stderr
    assert (
        f"children from the file 7, tokens from the file {meta['stats']['file_tokens']}" in summary
    )


@pytest.mark.parametrize(
    ("engine", "fork", "notice"),
    [
        ("openai", True, "the openai engine verifies instead"),
        ("torch", False, "the torch engine with --no-fork verifies instead"),
    ],
)
def test_prefer_falls_back_to_verify_with_a_notice(engine: str, fork: bool, notice: str) -> None:
    settings = ConvertSettings(".", render_options=RenderOptions(text_layer="prefer"))
    config = EngineConfig(model=str(TINY), fork=fork)
    extra = {"server": "http://127.0.0.1:9"} if engine == "openai" else {}
    made = create_engine(engine, config, **extra)
    notices: list[str] = []
    info = text_layer_info(made, settings, notices.append)
    assert info.text_layer is None and info.reuse_key().text_layer is None
    assert len(notices) == 1 and notices[0].endswith(notice)
    torch = create_engine("torch", EngineConfig(model=str(TINY)))
    assert text_layer_info(torch, settings, notices.append).text_layer == "prefer"
    verify = ConvertSettings(".", render_options=RenderOptions(text_layer="verify"))
    assert text_layer_info(torch, verify, notices.append).text_layer is None
    assert len(notices) == 1
