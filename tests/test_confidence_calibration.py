"""A floor under the confidence scores on the tiny checkpoint, so that a regression (log-
probabilities misaligned with their blocks, a wrong sign or scale) fails CI: on clean and lightly
degraded sample pages (tests/tinymodel/calibration.py), which the tiny model reads exactly, every
block is right and none is flagged at the default --flag-below.

What the scores do NOT reach on this checkpoint: ranking wrong blocks below right ones on
heavily degraded pages (benchmarks/bench_confidence.py: ROC AUC 0.56 at level L4, where 49% of
the blocks are wrong; the goal is 0.85). The tiny model memorised six pages and misreads
confidently; see the README's Confidence section. No AUROC floor is enforced for that reason."""

from __future__ import annotations

import pytest

pytest.importorskip("torch")

from hpdparse.engines import create_engine
from hpdparse.engines.base import EngineConfig
from hpdparse.hpd.confidence import DEFAULT_FLAG_BELOW
from tests.tinymodel import calibration

LEVELS = ("clean", "L2")
KEYS = [("paper", 1), ("report", 1)]


def test_pages_read_right_are_not_flagged() -> None:
    if not (calibration.SAMPLES / "report.pdf").is_file():
        pytest.skip("samples/ not generated")
    levels = [lv for lv in calibration.LEVELS if lv.name in LEVELS]
    model = str(calibration.REPO / "tests" / "fixtures" / "tiny-hpd")
    with create_engine("torch", EngineConfig(model=model, mtp=False)) as engine:
        for level, outcomes in calibration.run_levels(engine, levels, [0], KEYS):
            assert len(outcomes) >= 10, level.name
            assert all(o.right for o in outcomes), level.name
            lowest = min(o.score.confidence for o in outcomes)
            assert lowest >= DEFAULT_FLAG_BELOW, (level.name, lowest)
