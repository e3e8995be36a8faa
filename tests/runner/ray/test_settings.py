"""`RaySettings.fitted`: a request the cluster cannot hold is fitted (`--ray local`, this machine)
or refused in one line naming what fits (any other cluster)."""

from __future__ import annotations

import pytest

from hpdparse.errors import EngineError
from hpdparse.runner.ray.settings import RAY_AUTO, RaySettings


@pytest.mark.parametrize(
    ("asked", "cluster", "fitted"),
    [
        # (actors, CPUs per actor), (CPUs, GPUs, use GPUs) -> (actors, CPUs per actor)
        ((2, 2.0), (8, 0, False), (2, 2.0)),
        ((0, 2.0), (8, 0, False), (4, 2.0)),  # automatic: one per 2 CPUs
        ((2, 2.0), (2, 0, False), (2, 1.0)),  # the 2-core machine
        ((0, 2.0), (1, 0, False), (1, 1.0)),
        ((3, 2.0), (2, 0, False), (3, 0.66)),  # Ray takes fractions below one CPU
        ((2, 3.0), (5, 0, False), (2, 2.0)),  # and whole CPUs above one
        ((4, 2.0), (16, 2, True), (2, 2.0)),  # at most one actor per GPU
        ((0, 2.0), (16, 2, True), (2, 2.0)),
    ],
)
def test_local_requests_are_fitted_to_this_machine(
    asked: tuple[int, float], cluster: tuple[float, float, bool], fitted: tuple[int, float]
) -> None:
    actors, cpus = asked
    rs = RaySettings(actors=actors, cpus_per_actor=cpus)
    result, note = rs.fitted(100, *cluster)
    assert (result.actors, result.cpus_per_actor) == fitted
    fits = (actors or fitted[0], cpus) == fitted
    assert (note is None) == fits, note
    if note:
        assert "\n" not in note and note.startswith("--ray local: ")


def test_no_more_actors_than_units() -> None:
    result, note = RaySettings(actors=4, cpus_per_actor=1.0).fitted(1, 8, 0, False)
    assert (result.actors, note) == (1, None)


@pytest.mark.parametrize(
    ("asked", "cluster", "message"),
    [
        (
            (2, 2.0),
            (2, 0, False),
            "--ray: 2 engine actors × 2 CPUs do not fit a cluster of 2 CPUs: "
            "use --ray-actors 1 or --ray-cpus-per-actor 1",
        ),
        (
            (0, 4.0),
            (2, 0, False),
            "--ray: 1 engine actor × 4 CPUs does not fit a cluster of 2 CPUs: "
            "use --ray-cpus-per-actor 2",
        ),
        (
            (4, 2.0),
            (16, 2, True),
            "--ray: 4 engine actors × 2 CPUs and 1 GPU do not fit a cluster of 16 CPUs and "
            "2 GPUs: use --ray-actors 2",
        ),
    ],
)
def test_another_cluster_refuses_what_it_cannot_hold_in_one_line(
    asked: tuple[int, float], cluster: tuple[float, float, bool], message: str
) -> None:
    actors, cpus = asked
    with pytest.raises(EngineError) as error:
        RaySettings(address=RAY_AUTO, actors=actors, cpus_per_actor=cpus).fitted(100, *cluster)
    assert str(error.value) == message
