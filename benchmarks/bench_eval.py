"""How fast is `hpdparse eval`, against OmniDocBench's own evaluation code? OmniDocBench's demo
set (../shared/omnidocbench-demo: 18 pages of truth and predictions) repeated to `--pages`
pages (default 1,000; each copy under its own page name), scored by hpdparse.eval and, where its
code is installed, by OmniDocBench's pdf_validation.py (quick_match; CDM left out) on the same
files. Prints pages/s of each, the ratio, and whether both give the same figures (every figure
of its metric_result.json within 0.005).

    PYTHONPATH=$PWD python benchmarks/bench_eval.py [--pages 1000] [--workers N]
        [--official DIR --official-python PYTHON]

--official (or OMNIDOCBENCH_DIR): a checkout of OmniDocBench (github.com/opendatalab/
OmniDocBench); --official-python (or OMNIDOCBENCH_PYTHON): a Python with its requirements
(default: python3). Its time is the wall time of `python pdf_validation.py` (its imports
included, as a user runs it); hpdparse's is the wall time of hpdparse.eval.run.evaluate (its
imports done). The official run writes into DIR/result/ and DIR/configs/bench_eval.yaml.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from hpdparse.eval.run import default_workers, evaluate

DEMO = Path(__file__).resolve().parents[1] / ".." / "shared" / "omnidocbench-demo"
CONFIG = """end2end_eval:
  metrics:
    text_block: {{metric: [Edit_dist]}}
    display_formula: {{metric: [Edit_dist]}}
    table: {{metric: [TEDS, Edit_dist]}}
    reading_order: {{metric: [Edit_dist]}}
  dataset:
    dataset_name: end2end_dataset
    ground_truth: {{data_path: {truth}}}
    prediction: {{data_path: {pred}}}
    match_method: quick_match
"""


def repeated_set(folder: Path, pages: int) -> tuple[Path, Path]:
    """The demo set copied until it has `pages` pages: truth.json and pred/."""
    entries = json.loads((DEMO / "OmniDocBench_demo.json").read_text("utf-8"))
    pred = folder / "pred"
    pred.mkdir()
    truth = []
    for n in range(pages):
        entry = json.loads(json.dumps(entries[n % len(entries)]))
        image = Path(entry["page_info"]["image_path"]).name
        name = f"copy{n // len(entries):04d}_{image}"
        entry["page_info"]["image_path"] = name
        truth.append(entry)
        source = DEMO / "predictions" / (image.rsplit(".", 1)[0] + ".md")
        shutil.copyfile(source, pred / (name.rsplit(".", 1)[0] + ".md"))
    path = folder / "truth.json"
    path.write_text(json.dumps(truth, ensure_ascii=False), encoding="utf-8")
    return path, pred


def run_official(official: Path, python: str, truth: Path, pred: Path) -> tuple[float, dict]:
    config = official / "configs" / "bench_eval.yaml"
    config.write_text(CONFIG.format(truth=truth, pred=pred), encoding="utf-8")
    (official / "result").mkdir(exist_ok=True)
    start = time.perf_counter()
    subprocess.run(
        [python, "pdf_validation.py", "--config", str(config)],
        cwd=official,
        check=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    seconds = time.perf_counter() - start
    result = official / "result" / f"{pred.name}_quick_match_metric_result.json"
    return seconds, json.loads(result.read_text("utf-8"))


def differences(official: Any, ours: Any, path: str = "") -> list[str]:
    if isinstance(official, dict):
        return [d for k, v in official.items() for d in differences(v, ours.get(k), f"{path}/{k}")]
    if isinstance(official, str) or ours is None:
        return [] if official == ours else [f"{path}: {official} vs {ours}"]
    return [] if math.isclose(official, ours, abs_tol=0.005) else [f"{path}: {official} vs {ours}"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pages", type=int, default=1000)
    parser.add_argument("--workers", type=int, default=default_workers())
    parser.add_argument("--official", type=Path, default=os.environ.get("OMNIDOCBENCH_DIR"))
    parser.add_argument(
        "--official-python", default=os.environ.get("OMNIDOCBENCH_PYTHON", "python3")
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        truth, pred = repeated_set(Path(tmp), args.pages)
        start = time.perf_counter()
        report = evaluate(pred, truth, workers=args.workers)
        ours = time.perf_counter() - start
        print(f"pages: {args.pages} (the demo set repeated), workers: {args.workers}")
        print(f"hpdparse eval: {ours:.1f} s, {args.pages / ours:.1f} pages/s")
        if args.official is None:
            print("official code: not timed (pass --official DIR or set OMNIDOCBENCH_DIR)")
            return
        seconds, figures = run_official(args.official.resolve(), args.official_python, truth, pred)
        print(
            f"OmniDocBench pdf_validation.py: {seconds:.1f} s, {args.pages / seconds:.1f} pages/s"
        )
        print(f"ratio: {seconds / ours:.1f}x")
        diffs = differences(figures, report.metrics)
        print("same figures (within 0.005): " + ("yes" if not diffs else "no"))
        for line in diffs[:20]:
            print(f"  {line}")


if __name__ == "__main__":
    main()
