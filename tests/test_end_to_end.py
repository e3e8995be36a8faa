"""The main job, end to end: `hpdparse convert samples/...` with a local engine on the tiny trained
checkpoint gives the ground-truth raw pages and the golden Markdown a human has read.

The golden files (tests/markdown/golden/synth/<stem>/) are the converter's rendering of the
generator's ground-truth streams; here the streams come from the model instead.
"""

from __future__ import annotations

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


def _needs(module: str) -> None:
    if importlib.util.find_spec(module) is None:
        pytest.skip(f"{module} is not installed")


# vllm in plain mode is left out (this run of the CLI on vllm costs about 27 CPU-seconds): its pages
# equal the torch engine's (tests/engines/vllm/test_vllm_engine.py, on the sample pages) and the
# torch engine's plain run here checks those pages' Markdown.
@pytest.mark.parametrize(
    ("engine", "fork"),
    [("torch", True), ("torch", False), ("vllm", True)],
    ids=["fork-torch", "plain-torch", "fork-vllm"],
)
def test_convert_samples_gives_ground_truth_and_golden_markdown(
    engine: str, fork: bool, tmp_path: Path
) -> None:
    _needs("torch")
    if engine == "vllm":
        _needs("vllm")
    out = tmp_path / "out"
    report = tmp_path / "report.json"
    cmd = [sys.executable, "-m", "hpdparse", "convert", *(str(SAMPLES / i) for i in INPUTS)]
    cmd += ["-o", str(out), "--engine", engine, "--model", str(TINY), "--report", str(report)]
    cmd += ["--quiet"] + ([] if fork else ["--no-fork"])
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    proc = subprocess.run(
        cmd, capture_output=True, text=True, timeout=900, env=env, cwd=REPO, check=False
    )
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr

    for (stem, page), stream in load_ground_truth(REPO / "tests" / "fixtures" / "streams").items():
        raw = out / stem / "raw" / f"page-{page:04d}.txt"
        assert raw.read_text(encoding="utf-8") == stream, f"{engine}: {raw} differs from truth"

    for stem in (Path(i).stem for i in INPUTS):
        expected = (GOLDEN / stem / "expected.md").read_text(encoding="utf-8")
        assert (out / stem / f"{stem}.md").read_text(encoding="utf-8") == expected, stem
        images = (GOLDEN / stem / "expected-images.txt").read_text(encoding="utf-8").split()
        for name in (w for w in images if w.startswith("images/")):
            assert (out / stem / name).is_file(), f"{stem}: {name} was not cropped"
