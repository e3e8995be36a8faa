"""Engine.open(): the model and its revision resolved once, without loading weights, and the same
reuse key for every engine on one checkpoint (a hub id in a local Hugging Face cache, offline)."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.paths import REPO, SAMPLES, TINY

COMMIT = "c" * 40
HUB_ID = "acme/tiny-hpd"


@pytest.fixture
def hub_env(tmp_path: Path) -> dict[str, str]:
    """A Hugging Face cache holding HUB_ID at COMMIT (refs/main points at it), offline: what a
    user has once the model was downloaded. huggingface_hub reads these variables at import, so
    the code runs in fresh processes."""
    snapshot = tmp_path / "hf" / "hub" / "models--acme--tiny-hpd" / "snapshots" / COMMIT
    shutil.copytree(TINY, snapshot)
    refs = snapshot.parents[1] / "refs"
    refs.mkdir()
    (refs / "main").write_text(COMMIT)
    return {
        **os.environ,
        "HF_HUB_OFFLINE": "1",
        "HF_HOME": str(tmp_path / "hf"),
        "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]),
    }


_EVERY_LOCAL_ENGINE = """
import json, sys
from hpdparse.engines.base import EngineConfig
from hpdparse.engines.local import LocalEngine
from hpdparse.engines.registry import ENGINES, create_engine

def reuse_key(engine):
    engine.open()
    return engine.info.reuse_key().to_json()

def prompt(engine):
    engine._load_tokenizer()
    return engine.prompts.build(1, True)

found = {}
for name in ENGINES:
    engine = create_engine(name, EngineConfig(model=sys.argv[1]))
    if isinstance(engine, LocalEngine):
        found[name] = globals()[sys.argv[2]](engine)
heavy = sorted(m for m in ("torch", "vllm", "transformers") if m in sys.modules)
print(json.dumps({"found": found, "imported": heavy}))
"""


def every_local_engine(model: str | Path, step: str, env: dict[str, str] | None = None) -> dict:
    """`step` (reuse_key or prompt) of every local engine on `model`, in a fresh process:
    {"found": {engine name: its answer}, "imported": the model libraries it imported}."""
    out = subprocess.run(
        [sys.executable, "-c", _EVERY_LOCAL_ENGINE, str(model), step],
        env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.splitlines()[-1])  # the last line: what the script printed


def test_every_local_engine_gives_the_same_reuse_key_for_a_hub_model(
    hub_env: dict[str, str],
) -> None:
    found = every_local_engine(HUB_ID, "reuse_key", hub_env)
    keys = found["found"]
    assert set(keys) == {"vllm", "torch"}
    assert keys["vllm"] == keys["torch"]
    assert keys["torch"]["revision"] == COMMIT and keys["torch"]["model"] == HUB_ID
    assert found["imported"] == []  # open() reads JSON only: no model library, no weights


@pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="needs the [torch] extra")
@pytest.mark.skipif(importlib.util.find_spec("vllm") is None, reason="needs vllm installed")
def test_pages_decoded_by_torch_are_reused_by_vllm(hub_env: dict[str, str], tmp_path: Path) -> None:
    out = tmp_path / "out"

    def convert(engine: str) -> dict:
        report = tmp_path / f"{engine}.json"
        args = [sys.executable, "-m", "hpdparse", "convert", str(SAMPLES / "scan.png")]
        args += ["--engine", engine, "--model", HUB_ID, "--device", "cpu", "--workers", "1"]
        args += ["-o", str(out), "--quiet", "--report", str(report)]
        proc = subprocess.run(args, env=hub_env, capture_output=True, text=True, timeout=600)
        assert proc.returncode == 0, proc.stderr
        return json.loads(report.read_text())

    first = convert("torch")
    assert first["revision"] == COMMIT and first["documents"][0]["status"] == "converted"
    meta = json.loads((out / "scan" / "raw" / "page-0001.json").read_text())
    assert meta["reuse_key"]["revision"] == COMMIT
    # The vllm engine finds the document done with the same model, revision and prompt: it
    # is skipped, and vLLM is never started.
    second = convert("vllm")
    assert second["revision"] == COMMIT
    assert second["documents"][0]["status"] == "skipped", second["documents"][0]


@pytest.mark.skipif(importlib.util.find_spec("vllm") is None, reason="needs vllm installed")
def test_every_local_engine_takes_the_default_of_named_chat_templates(tmp_path: Path) -> None:
    """A tokenizer_config.json may list named chat templates: each engine builds its prompt
    from the one named "default" (vllm once fell back to InternVL's built-in prompt)."""
    named = tmp_path / "named-templates"
    shutil.copytree(TINY, named)
    config_path = named / "tokenizer_config.json"
    config = json.loads(config_path.read_text("utf-8"))
    default = config["chat_template"].replace("\\n' }}{% endif %}", "\\nDEFAULT' }}{% endif %}")
    assert default != config["chat_template"]
    config["chat_template"] = [
        {"name": "tool_use", "template": "{{ messages[0]['content'] }}"},
        {"name": "default", "template": default},
    ]
    config_path.write_text(json.dumps(config), "utf-8")

    got = every_local_engine(named, "prompt")["found"]
    plain = every_local_engine(TINY, "prompt")["found"]
    assert set(got) == {"vllm", "torch"}
    assert got["vllm"] == got["torch"] != plain["torch"]
