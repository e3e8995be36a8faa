"""malloc set to keep freed memory (hpdparse/engines/vllm/host_memory.py): a large tensor made
again after one was freed reuses the process's memory instead of faulting in fresh pages."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.helpers.paths import REPO

# Two 64 MiB tensors a round (above glibc's largest mmap threshold, 32 MiB), freed at once: the
# minor page faults of each round, after eight rounds that size the heap. Kept, the heap grows to
# its size over the first rounds, not in one (up to round 5 of 12 runs here: a freed tensor is
# not always where the next one fits); with one round before, a third of runs counted more than
# a quarter of the default's faults, and none did from round 9 on.
_ROUNDS = """
import json, resource, sys
import torch
from hpdparse.engines.vllm import host_memory
if sys.argv[1] == "keep":
    assert host_memory.keep_freed_memory()
def faults_of_a_round():
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    first = torch.ones(16 << 20)
    second = torch.ones(16 << 20)
    del first, second
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before
for _ in range(8):
    faults_of_a_round()
print(json.dumps([faults_of_a_round() for _ in range(8)]))
"""


def _faults(mode: str) -> list[int]:
    out = subprocess.run(
        [sys.executable, "-c", _ROUNDS, mode],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's malloc")
def test_freed_tensors_are_reused_without_page_faults() -> None:
    default, kept = _faults("default"), _faults("keep")
    # Unset, every round maps 128 MiB afresh: one fault per 4 KiB page.
    assert min(default) >= 2 * (64 << 20) // 4096 // 2, default
    assert sum(kept) * 4 <= sum(default), (kept, default)
