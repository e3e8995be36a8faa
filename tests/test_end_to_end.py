"""The main job, end to end: `hpdparse convert samples/...` with a local engine on the tiny trained
checkpoint gives the ground-truth raw pages and the golden Markdown a human has read.

The golden files (tests/markdown/golden/synth/<stem>/) are the converter's rendering of the
generator's ground-truth streams; here the streams come from the model instead.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.tinymodel.synth import load_ground_truth

REPO = Path(__file__).resolve().parents[1]
TINY = REPO / "tests" / "fixtures" / "tiny-hpd"
SAMPLES = REPO / "samples"
GOLDEN = REPO / "tests" / "markdown" / "golden" / "synth"
INPUTS = ["report.pdf", "paper.pdf", "memo.pdf", "scan.png"]


ENGINES = ["torch", "vllm"]
MODES = {"fork": True, "plain": False}


def _missing(engine: str) -> str | None:
    for module in ("torch", engine):
        if importlib.util.find_spec(module) is None:
            return f"{module} is not installed"
    return None


@pytest.fixture(scope="module")
def conversions(tmp_path_factory: pytest.TempPathFactory) -> dict[tuple[str, str], Finished]:
    """The conversions (engine x mode) run side by side: each is a process of its own whose
    start (importing torch or vLLM) is most of its time."""
    started: dict[tuple[str, str], tuple[subprocess.Popen, Path]] = {}
    finished: dict[tuple[str, str], Finished] = {}
    try:
        for engine in (e for e in ENGINES if _missing(e) is None):
            for mode, fork in MODES.items():
                folder = tmp_path_factory.mktemp(f"{engine}-{mode}")
                started[engine, mode] = (_start(engine, fork, folder), folder / "out")
        for key, (proc, out) in started.items():
            _, stderr = proc.communicate(timeout=900)
            finished[key] = Finished(proc.returncode, stderr, out)
    finally:
        for proc, _ in started.values():
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
    return finished


@dataclasses.dataclass
class Finished:
    returncode: int
    stderr: str
    out: Path


def _start(engine: str, fork: bool, folder: Path) -> subprocess.Popen:
    cmd = [sys.executable, "-m", "hpdparse", "convert", *(str(SAMPLES / i) for i in INPUTS)]
    cmd += ["-o", str(folder / "out"), "--engine", engine, "--model", str(TINY)]
    cmd += ["--report", str(folder / "report.json"), "--quiet"] + ([] if fork else ["--no-fork"])
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    return subprocess.Popen(
        cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env, cwd=REPO
    )


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("mode", list(MODES))
def test_convert_samples_gives_ground_truth_and_golden_markdown(
    engine: str, mode: str, conversions: dict
) -> None:
    if _missing(engine):
        pytest.skip(_missing(engine))
    run = conversions[engine, mode]
    assert run.returncode == 0, run.stderr
    assert "Traceback" not in run.stderr
    out = run.out

    for (stem, page), stream in load_ground_truth(REPO / "tests" / "fixtures" / "streams").items():
        raw = out / stem / "raw" / f"page-{page:04d}.txt"
        assert raw.read_text(encoding="utf-8") == stream, f"{engine}: {raw} differs from truth"

    for stem in (Path(i).stem for i in INPUTS):
        expected = (GOLDEN / stem / "expected.md").read_text(encoding="utf-8")
        assert (out / stem / f"{stem}.md").read_text(encoding="utf-8") == expected, stem
        images = (GOLDEN / stem / "expected-images.txt").read_text(encoding="utf-8").split()
        for name in (w for w in images if w.startswith("images/")):
            assert (out / stem / name).is_file(), f"{stem}: {name} was not cropped"
