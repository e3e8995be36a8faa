"""An evaluation run: load the truth, find each page's prediction, score the pages in parallel
processes, gather the figures into the report (a plain dict, what report.json holds)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

from hpdparse.eval import aggregate
from hpdparse.eval.inputs import TruthPage, find_prediction, load_truth
from hpdparse.eval.page import score_page

MAX_PAGES_PER_TASK = 8  # fewer where there are few pages per worker: one table-heavy batch
# would otherwise keep a worker busy after the others are done


def _score(task: tuple[str, dict[str, Any], str]) -> dict[str, Any]:
    name, truth, markdown = task
    try:
        return score_page(name, truth, markdown)
    except Exception as exc:  # a page the matcher cannot handle: reported, the run goes on
        return {"name": name, "error": f"{type(exc).__name__}: {exc}"}


def _scored(tasks: list[tuple[str, dict[str, Any], str]], workers: int) -> Iterator[dict]:
    if workers <= 1 or len(tasks) < 2:
        yield from map(_score, tasks)
        return
    chunk = max(1, min(MAX_PAGES_PER_TASK, len(tasks) // (workers * 4)))
    with ProcessPoolExecutor(max_workers=workers) as pool:
        yield from pool.map(_score, tasks, chunksize=chunk)


def default_workers() -> int:
    """One per CPU core this process may use (max 16)."""
    if hasattr(os, "sched_getaffinity"):  # Linux
        cores = len(os.sched_getaffinity(0))
    else:
        cores = os.cpu_count() or 1
    return max(1, min(cores, 16))


def evaluate(pred: Path, truth: Path, workers: int | None = None) -> dict[str, Any]:
    """Score the predictions in `pred` against `truth`; the report as a dict."""
    pages, problems = load_truth(truth)
    tasks, missing = [], []
    for page in pages:
        markdown, source = find_prediction(pred, page.name)
        if markdown is None:  # OmniDocBench leaves the page out too
            missing.append({"page": page.name, "reason": source})
            continue
        tasks.append((page.name, page.page, markdown))
    scored, failed = [], []
    for result in _scored(tasks, workers or default_workers()):
        if "error" in result:
            failed.append({"page": result["name"], "reason": result["error"]})
        else:
            scored.append(result)
    return build_report(
        pages, scored, {"missing": missing, "failed": failed, "truth": problems}, pred, truth
    )


def build_report(
    pages: list[TruthPage], scored: list[dict], problems: dict[str, list], pred: Path, truth: Path
) -> dict[str, Any]:
    attributes = {p.name: p.attributes for p in pages if p.attributes}
    samples = aggregate.element_samples(scored)
    metrics = {
        name: aggregate.element_figures(name, samples[name], attributes)
        for name in aggregate.ELEMENTS
    }
    per_page = {p["name"]: aggregate.page_figures(p) for p in scored}
    notes = [f"{p['name']}: {note}" for p in scored for note in p["notes"]]
    return {
        "prediction": str(pred),
        "truth": str(truth),
        "pages": {"truth": len(pages), "scored": len(scored)},
        "metrics": metrics,
        "overall": aggregate.overall(metrics),
        "per_page": per_page,
        "problems": {**problems, "notes": notes},
        "_pages": scored,  # the pairs, for the HTML page; not written to report.json
    }
