"""An evaluation run: load the truth, find each page's prediction, score the pages in parallel
processes, gather the figures into the report (report.json's figures, and the scored pages)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TypedDict

from hpdparse.eval import aggregate
from hpdparse.eval.inputs import find_prediction, load_truth
from hpdparse.eval.page import score_page
from hpdparse.eval.records import ScoredPage, TruthPage

MAX_PAGES_PER_TASK = 8  # fewer where there are few pages per worker: one table-heavy batch
# would otherwise keep a worker busy after the others are done


class Unscored(TypedDict):
    """A truth page not scored, and why (no prediction, or the matcher failed on it)."""

    page: str
    reason: str


class Problems(TypedDict):
    missing: list[Unscored]  # pages without a prediction
    failed: list[Unscored]  # pages that could not be scored
    truth: list[str]  # truth entries left out
    notes: list[str]  # figures set as OmniDocBench sets them (a table that does not parse)


@dataclass
class Report:
    """A run's figures (what report.json holds) and its scored pages (for report.html)."""

    prediction: str
    truth: str
    pages: dict[str, int]  # truth, scored
    metrics: dict[str, aggregate.ElementFigures]
    overall: aggregate.Overall
    per_page: dict[str, aggregate.PerPageFigures]
    problems: Problems
    scored: list[ScoredPage]


def _score(task: tuple[TruthPage, str]) -> ScoredPage | Unscored:
    truth, markdown = task
    try:
        return score_page(truth, markdown)
    except Exception as exc:  # a page the matcher cannot handle: reported, the run goes on
        return {"page": truth.name, "reason": f"{type(exc).__name__}: {exc}"}


def _scored(tasks: list[tuple[TruthPage, str]], workers: int) -> Iterator[ScoredPage | Unscored]:
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


def evaluate(pred: Path, truth: Path, workers: int | None = None) -> Report:
    """Score the predictions in `pred` against `truth`."""
    pages, truth_problems = load_truth(truth)
    tasks, missing = [], []
    for page in pages:
        markdown, source = find_prediction(pred, page.name)
        if markdown is None:  # OmniDocBench leaves the page out too
            missing.append(Unscored(page=page.name, reason=source))
            continue
        tasks.append((page, markdown))
    results = list(_scored(tasks, workers or default_workers()))
    scored = [result for result in results if isinstance(result, ScoredPage)]
    failed = [result for result in results if not isinstance(result, ScoredPage)]
    attributes = {p.name: p.attributes for p in pages if p.attributes}
    samples = aggregate.element_samples(scored)
    metrics = {
        name: aggregate.element_figures(name, samples[name], attributes)
        for name in aggregate.ELEMENTS
    }
    return Report(
        str(pred),
        str(truth),
        {"truth": len(pages), "scored": len(scored)},
        metrics,
        aggregate.overall(metrics),
        {p.name: aggregate.page_figures(p) for p in scored},
        Problems(
            missing=missing,
            failed=failed,
            truth=truth_problems,
            notes=[f"{p.name}: {note}" for p in scored for note in p.notes],
        ),
        scored,
    )
