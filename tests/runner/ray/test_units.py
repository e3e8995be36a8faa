"""Work units, result rows and the Ray settings: plain Python, no cluster needed."""

from __future__ import annotations

import pytest

from hpdparse.runner.ray.settings import RaySettings
from hpdparse.runner.ray.units import PageRow, WorkUnit, columns, cut_units, rows_of


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
