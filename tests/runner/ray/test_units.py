"""Work units, result rows and the Ray settings: plain Python, no cluster needed."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy
import pytest

from hpdparse.runner.ray.settings import RaySettings
from hpdparse.runner.ray.units import PageRow, WorkUnit, columns, cut_units, rows_of
from tests.helpers.paths import REPO, SAMPLES


def test_units_cut_a_document_into_ranges_of_at_most_unit_pages() -> None:
    units = cut_units(5, 2, "/in/a.pdf", "/out/a", [1, 2, 3, 7, 8], 2)
    assert [u.unit for u in units] == [5, 6, 7]
    assert [u.pages for u in units] == [(1, 2), (3, 7), (8,)]
    assert all((u.doc, u.source, u.folder) == (2, "/in/a.pdf", "/out/a") for u in units)


def test_units_and_rows_survive_the_column_batches_ray_passes() -> None:
    unit = WorkUnit(3, 1, "/in/b.pdf", "/out/b", (4, 5))
    assert [WorkUnit.from_row(r) for r in rows_of(columns([unit.to_row()]))] == [unit]
    row = PageRow(3, 1, 4, "decoded", prompt_tokens=7, output_tokens=9, stats={"forks": 2})
    assert [PageRow.from_row(r) for r in rows_of(columns([row.to_row()]))] == [row]
    # Rows Ray hands back hold numpy scalars: read as the Python types the record declares.
    back = PageRow.from_row({key: numpy.asarray(value)[()] for key, value in row.to_row().items()})
    assert back == row and type(back.page) is int and type(back.status) is str


def test_actor_count_follows_gpus_then_cpu_groups() -> None:
    settings = RaySettings(cpus_per_actor=2)
    assert settings.actor_count(cluster_gpus=4, cluster_cpus=64, use_gpus=True) == 4
    assert settings.actor_count(cluster_gpus=0, cluster_cpus=8, use_gpus=True) == 4
    assert settings.actor_count(cluster_gpus=4, cluster_cpus=9, use_gpus=False) == 4
    assert settings.actor_count(cluster_gpus=0, cluster_cpus=1, use_gpus=False) == 1
    assert RaySettings(actors=3).actor_count(8, 64, True) == 3


def test_an_actor_holds_enough_units_for_its_batch() -> None:
    settings = RaySettings(unit_pages=16)
    assert settings.calls_per_actor(512) == 33
    assert settings.calls_per_actor(1) == 2


@pytest.mark.parametrize(
    "bad", [{"address": ""}, {"actors": -1}, {"cpus_per_actor": 0}, {"unit_pages": 0}]
)
def test_bad_settings_are_one_line_errors(bad: dict) -> None:
    with pytest.raises(ValueError, match="."):
        RaySettings(**bad)


def test_plain_convert_never_imports_ray() -> None:
    code = (
        "import sys, hpdparse.commands.main, hpdparse.api;"
        "loaded = [m for m in sys.modules if m == 'ray' or m.startswith('ray.')];"
        "assert not loaded, loaded"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=REPO)


def test_ray_missing_is_a_one_line_error(tmp_path: Path) -> None:
    # A Ray that cannot be imported, as without the [ray] extra (None in sys.modules).
    code = (
        "import sys; sys.modules['ray'] = None\n"
        "from hpdparse.commands.main import main\n"
        f"main(['convert', {str(SAMPLES / 'memo.pdf')!r}, '-o', {str(tmp_path / 'out')!r}, "
        "'--engine', 'openai', '--ray', 'local'])\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO)
    assert proc.returncode == 1
    assert proc.stderr.strip().splitlines() == [
        "error: --ray needs Ray Data (ray[data]>=2.60,<2.61): pip install 'hpdparse[ray]' "
        "(cannot import ray)"
    ]
    assert not (tmp_path / "out").exists()
