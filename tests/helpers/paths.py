"""Where the repository, the samples, the test fixtures and the shared corpus are."""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SAMPLES = REPO / "samples"
FIXTURES = REPO / "tests" / "fixtures"
TINY = FIXTURES / "tiny-hpd"
CORPUS = REPO.parent / "shared" / "corpus"
