"""`hpdparse serve` on the tiny checkpoint with the vllm engine, as a real subprocess, checked with
our own client (`convert --engine openai`), raw HTTP requests and SIGTERM.

One server for the whole module (one vLLM start-up); the SIGTERM test stops it and runs last.
"""

from __future__ import annotations

import base64
import concurrent.futures
import io
import json
import os
import queue
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from click.testing import CliRunner

from tests.helpers.paths import FIXTURES, REPO, SAMPLES
from tests.tinymodel.synth import load_ground_truth

try:  # only an absent vllm skips; a vllm that is installed but broken fails the tests
    import vllm  # noqa: F401
except ImportError as exc:  # pragma: no cover - depends on the environment
    pytest.skip(f"vllm is not installed ({exc})", allow_module_level=True)

import httpx  # noqa: E402

from hpdparse.cli import main  # noqa: E402
from hpdparse.engines.openai.engine import encode_page_png  # noqa: E402
from hpdparse.hpd.protocol import instruction  # noqa: E402
from hpdparse.sources.rasterize import rasterize_page  # noqa: E402

pytestmark = pytest.mark.vllm

TINY = FIXTURES / "tiny-hpd"
STREAMS = FIXTURES / "streams"
INPUTS = ["report.pdf", "paper.pdf", "memo.pdf", "scan.png"]
START_TIMEOUT = 180.0


@dataclass
class Served:
    proc: subprocess.Popen
    url: str
    stderr: Path


def _read_lines(stream, lines: queue.Queue) -> None:  # noqa: ANN001
    for line in stream:
        lines.put(line)
    lines.put(None)


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    stderr = tmp_path_factory.mktemp("serve") / "stderr.txt"
    cmd = [sys.executable, "-m", "hpdparse", "serve", "--model", str(TINY), "--engine", "vllm"]
    # HPDPARSE_TEST_DEVICE=cuda: the engine's GPU defaults, as in test_vllm_engine.py.
    device = os.environ.get("HPDPARSE_TEST_DEVICE", "cpu")
    cmd += ["--port", "0", "--device", device, "--engine-option", "kv_cache_gib=0.25"]
    cmd += ["--max-queued", "3"]  # the concurrent requests must wait for room
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    with open(stderr, "w", encoding="utf-8") as err:
        proc = subprocess.Popen(
            cmd, stdout=subprocess.PIPE, stderr=err, text=True, cwd=REPO, env=env
        )
    lines: queue.Queue = queue.Queue()
    threading.Thread(target=_read_lines, args=(proc.stdout, lines), daemon=True).start()
    try:
        line = lines.get(timeout=START_TIMEOUT)
        assert line and line.startswith("serving "), (line, stderr.read_text())
        assert " on http://127.0.0.1:" in line
        yield Served(proc, line.rsplit(" on ", 1)[1].strip(), stderr)
    finally:
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


@pytest.fixture(scope="module")
def truth() -> dict[tuple[str, int], str]:
    return load_ground_truth(STREAMS)


@pytest.fixture(scope="module")
def page_pngs(truth) -> dict[tuple[str, int], bytes]:  # noqa: ANN001
    """Each sample page as `convert` sends it: rendered at 200 dpi, encoded as PNG."""
    files = {Path(name).stem: SAMPLES / name for name in INPUTS}
    return {
        (stem, page): encode_page_png(rasterize_page(str(files[stem]), page, 200).image)
        for stem, page in truth
    }


def _body(image: bytes, mime: str = "image/png", **fields: object) -> dict:
    url = f"data:{mime};base64," + base64.b64encode(image).decode("ascii")
    content = [
        {"type": "image_url", "image_url": {"url": url}},
        {"type": "text", "text": instruction(True)},
    ]
    return {
        "model": str(TINY),
        "messages": [{"role": "user", "content": content}],
        "temperature": 0,
        "max_tokens": 8000,
        **fields,
    }


def _post(url: str, body: object, client: httpx.Client | None = None) -> httpx.Response:
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    if client is not None:
        return client.post(f"{url}/chat/completions", content=data)
    return httpx.post(f"{url}/chat/completions", content=data, timeout=120)


def test_models_lists_the_served_model(served: Served) -> None:
    answer = httpx.get(f"{served.url}/models", timeout=10)
    assert answer.status_code == 200
    assert [m["id"] for m in answer.json()["data"]] == [str(TINY)]


def test_convert_through_the_server_gives_the_ground_truth(
    served: Served, truth, tmp_path: Path
) -> None:  # noqa: ANN001
    out = tmp_path / "out"
    args = ["convert", *(str(SAMPLES / name) for name in INPUTS), "-o", str(out)]
    args += ["--engine", "openai", "--server", served.url, "--quiet"]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    for (stem, page), stream in truth.items():
        raw = out / stem / "raw" / f"page-{page:04d}.txt"
        assert raw.read_text(encoding="utf-8") == stream, f"{raw} differs from the ground truth"


def test_concurrent_requests_are_all_answered_right(served: Served, truth, page_pngs) -> None:  # noqa: ANN001
    keys = sorted(truth) * 3  # 21 requests, 16 at once
    with httpx.Client(timeout=120) as client:

        def ask(key: tuple[str, int]) -> tuple[tuple[str, int], httpx.Response]:
            return key, _post(served.url, _body(page_pngs[key]), client)

        with concurrent.futures.ThreadPoolExecutor(16) as pool:
            answers = list(pool.map(ask, keys))
    ids = set()
    for key, answer in answers:
        assert answer.status_code == 200, answer.text
        data = answer.json()
        assert data["object"] == "chat.completion"
        assert data["model"] == str(TINY)
        (choice,) = data["choices"]
        assert choice["message"]["role"] == "assistant"
        assert choice["message"]["content"] == truth[key], key
        assert choice["finish_reason"] == "stop"
        usage = data["usage"]
        assert usage["prompt_tokens"] > 0 and usage["completion_tokens"] > 0
        assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"]
        ids.add(data["id"])
    assert len(ids) == len(keys)


def test_a_jpeg_page_and_a_request_without_instruction_are_answered(
    served: Served, truth, page_pngs
) -> None:  # noqa: ANN001
    from PIL import Image

    key = sorted(truth)[0]
    buffer = io.BytesIO()
    Image.open(io.BytesIO(page_pngs[key])).save(buffer, "JPEG", quality=95)
    answer = _post(served.url, _body(buffer.getvalue(), "image/jpeg"))
    assert answer.status_code == 200, answer.text
    assert answer.json()["choices"][0]["message"]["content"].startswith("<BLOCK>")
    body = _body(page_pngs[key])
    body["messages"][0]["content"] = body["messages"][0]["content"][:1]  # the image only
    del body["model"]  # the one served model
    answer = _post(served.url, body)
    assert answer.status_code == 200, answer.text
    assert answer.json()["choices"][0]["message"]["content"] == truth[key]


def _bad_requests(png: bytes) -> list[tuple[str, object, int, str]]:
    no_image = _body(png)
    no_image["messages"][0]["content"] = [{"type": "text", "text": instruction(True)}]
    corrupt = png[: len(png) // 2]
    plain = _body(png)
    plain["messages"][0]["content"][1]["text"] = instruction(False)
    return [
        ("not JSON", b"{not json", 400, "not JSON"),
        ("not an object", b"[1, 2]", 400, "JSON object"),
        ("no image", no_image, 400, "got 0"),
        ("corrupt image", _body(corrupt), 400, "cannot decode the image"),
        ("not base64", _bad_base64(png), 400, "base64"),
        ("a GIF", _body(_gif()), 400, "not PNG or JPEG"),
        ("unknown model", _body(png, model="other/model"), 404, "'other/model' does not exist"),
        ("stream", _body(png, stream=True), 400, "streaming is not supported"),
        ("plain instruction", plain, 400, "with hierarchical forks"),
    ]


def _bad_base64(png: bytes) -> dict:
    body = _body(png)
    body["messages"][0]["content"][0]["image_url"]["url"] = "data:image/png;base64,@@@"
    return body


def _gif() -> bytes:
    from PIL import Image

    buffer = io.BytesIO()
    Image.new("RGB", (8, 8), "white").save(buffer, "GIF")
    return buffer.getvalue()


def test_bad_requests_get_a_clear_error_and_the_server_keeps_serving(
    served: Served, truth, page_pngs
) -> None:  # noqa: ANN001
    key = sorted(truth)[0]
    for name, body, status, words in _bad_requests(page_pngs[key]):
        answer = _post(served.url, body)
        assert answer.status_code == status, (name, answer.text)
        error = answer.json()["error"]
        assert words in error["message"], (name, error)
        assert "\n" not in error["message"]
        assert error["code"] == status and error["type"].endswith("Error")
    missing = httpx.post(f"{served.url}/completions", content=b"{}", timeout=10)
    assert missing.status_code == 404 and "no route" in missing.json()["error"]["message"]
    answer = _post(served.url, _body(page_pngs[key]))
    assert answer.status_code == 200
    assert answer.json()["choices"][0]["message"]["content"] == truth[key]


def test_a_model_that_cannot_load_is_a_one_line_error(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        main, ["serve", "--model", str(tmp_path / "absent"), "--port", "0", "--device", "cpu"]
    )
    assert result.exit_code == 1
    assert result.output.strip().count("\n") == 0
    assert result.output.startswith("error: ") and "absent" in result.output


def test_a_port_in_use_is_a_one_line_error_before_the_model_loads() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        began = time.monotonic()
        result = CliRunner().invoke(
            main, ["serve", "--model", str(TINY), "--port", str(port), "--device", "cpu"]
        )
    assert result.exit_code == 1
    assert (
        result.output.strip() == f"error: cannot listen on 127.0.0.1:{port}: Address already in use"
    )
    assert time.monotonic() - began < 5  # vLLM was not started


def test_sigterm_stops_the_server_cleanly(served: Served, truth, page_pngs) -> None:  # noqa: ANN001
    """Runs last: stops the module's server. Pages decoding at the signal finish or get 503."""
    keys = sorted(truth) * 4  # some still decoding at the signal (on this CPU)
    with concurrent.futures.ThreadPoolExecutor(len(keys)) as pool:
        pending = [pool.submit(_post, served.url, _body(page_pngs[key])) for key in keys]
        time.sleep(0.3)  # the requests are in
        began = time.monotonic()
        served.proc.send_signal(signal.SIGTERM)
        code = served.proc.wait(30)
        stopped_in = time.monotonic() - began
        for key, future in zip(keys, pending, strict=True):
            try:
                answer = future.result()
            except httpx.TransportError:
                continue  # sent after the listener closed
            if answer.status_code == 200:
                assert answer.json()["choices"][0]["message"]["content"] == truth[key]
            else:
                assert answer.status_code == 503, answer.text
                assert "shutting down" in answer.json()["error"]["message"]
    assert code == 0, served.stderr.read_text()
    assert stopped_in < 15
    assert "Traceback" not in served.stderr.read_text()
