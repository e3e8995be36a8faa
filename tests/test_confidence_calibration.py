"""A floor under what confidence means, so that a regression fails CI: the tiny model on three
degraded sample pages (tests/tinymodel/calibration.py) must get some blocks wrong and some right,
and rank them by confidence with a ROC AUC of at least FLOOR (benchmarks/bench_confidence.py
measures the full set; the README gives its figures)."""

from __future__ import annotations

import pytest

pytest.importorskip("torch")

from hpdparse.engines import create_engine
from hpdparse.engines.base import EngineConfig
from tests.tinymodel import calibration

FLOOR = 0.75
LEVEL = "L3"
KEYS = [("paper", 1), ("report", 1), ("report", 2)]


def test_confidence_ranks_wrong_blocks_below_right_ones() -> None:
    if not (calibration.SAMPLES / "report.pdf").is_file():
        pytest.skip("samples/ not generated")
    level = next(lv for lv in calibration.LEVELS if lv.name == LEVEL)
    config = EngineConfig(
        model=str(calibration.REPO / "tests" / "fixtures" / "tiny-hpd"), mtp=False
    )
    with create_engine("torch", config) as engine:
        ((_, outcomes),) = calibration.run_levels(engine, [level], [0], KEYS)
    wrong = [o.score.confidence for o in outcomes if not o.right]
    right = [o.score.confidence for o in outcomes if o.right]
    assert wrong and right, (len(wrong), len(right))
    assert calibration.auroc(wrong, right) >= FLOOR
