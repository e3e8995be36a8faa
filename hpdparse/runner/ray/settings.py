"""The settings of a `--ray` run (on top of `ConvertSettings`): where the cluster is and how the
work is cut and spread, with the flags of those the command line sets. No Ray import here."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from hpdparse.errors import EngineError
from hpdparse.settings import setting

RAY_LOCAL = "local"
"""Start a Ray cluster on this machine for the run (every GPU of this machine)."""

RAY_AUTO = "auto"
"""Join the running cluster (RAY_ADDRESS, or the one `ray start` made on this machine)."""

DEFAULT_UNIT_PAGES = 16
"""Pages per work unit: small enough to spread a document over actors and to bound what a
retried unit redoes, big enough that the per-unit overhead stays small."""

DEFAULT_UNIT_ATTEMPTS = 3
"""Attempts of a work unit whose actor dies (dead engine, killed process, lost node) before it is
given up and its pages reported as failed."""

DEFAULT_CPUS_PER_ACTOR = 2.0

DEFAULT_HANG_SECONDS = 900.0
"""An engine that returns no page for this long while it has pages in flight is taken for hung:
its actor process exits so that Ray restarts it."""

DEFAULT_ACTOR_START_SECONDS = 600.0
"""How long the run waits for its first actors to start (model loading included)."""

MAX_CALLS_PER_ACTOR = 64


@dataclass(frozen=True)
class RaySettings:
    """How a `--ray` run uses the cluster."""

    address: str = RAY_LOCAL  # RAY_LOCAL, RAY_AUTO, ray://host:port or host:port
    actors: int = setting(
        0,
        "With --ray: engine actors (each holds --batch-size pages in flight). Default: one per "
        "GPU of the cluster, or one per --ray-cpus-per-actor CPUs on a cluster without GPUs.",
        flag="--ray-actors",
        low=0,
        show_default=False,
    )
    cpus_per_actor: float = setting(
        DEFAULT_CPUS_PER_ACTOR,
        "With --ray: CPUs each engine actor reserves, for its engine and its rasterizer "
        "processes. Default: 2.",
        flag="--ray-cpus-per-actor",
        low=0.01,
        show_default=False,
    )
    unit_pages: int = DEFAULT_UNIT_PAGES
    unit_attempts: int = DEFAULT_UNIT_ATTEMPTS
    hang_seconds: float = DEFAULT_HANG_SECONDS
    actor_start_seconds: float = DEFAULT_ACTOR_START_SECONDS
    stall_seconds: float = 0.0  # > 0: end the run when no page comes back for this long

    def __post_init__(self) -> None:
        if not self.address:
            raise ValueError("--ray needs local, auto or a cluster address (ray://host:port)")
        if self.actors < 0:
            raise ValueError(f"--ray-actors must be 0 (automatic) or more, not {self.actors}")
        if self.cpus_per_actor <= 0:
            raise ValueError(f"--ray-cpus-per-actor must be positive, not {self.cpus_per_actor}")
        if self.unit_pages < 1 or self.unit_attempts < 1:
            raise ValueError("work units need at least one page and one attempt")

    def calls_per_actor(self, batch_size: int) -> int:
        """Units an actor holds at once so that --batch-size pages can be in flight in it."""
        needed = -(-batch_size // self.unit_pages) + 1  # one more: the next unit is rasterized
        return max(2, min(MAX_CALLS_PER_ACTOR, needed))

    def actor_count(self, cluster_gpus: float, cluster_cpus: float, use_gpus: bool) -> int:
        """--ray-actors, or one actor per GPU (GPU engines on a cluster with GPUs), else one per
        `cpus_per_actor` CPUs; at least one."""
        if self.actors:
            return self.actors
        if use_gpus and cluster_gpus >= 1:
            return int(cluster_gpus)
        return max(1, int(cluster_cpus // self.cpus_per_actor))

    def fitted(
        self, units: int, cluster_cpus: float, cluster_gpus: float, use_gpus: bool
    ) -> tuple[RaySettings, str | None]:
        """These settings with the actor count resolved (at most one per unit) and checked
        against what the cluster holds, and a note when they were changed to fit. A `--ray
        local` cluster is this machine: what does not fit is fitted (as many actors as asked,
        at most one per GPU, sharing the CPUs). On another cluster a request that cannot fit is
        a one-line EngineError naming what would, rather than actors Ray waits for in vain."""
        actors = min(units, self.actor_count(cluster_gpus, cluster_cpus, use_gpus))
        cpus = self.cpus_per_actor
        fit_actors = min(actors, int(cluster_gpus)) if use_gpus else actors
        fit_cpus = min(cpus, _cpu_share(cluster_cpus, fit_actors))
        if (fit_actors, fit_cpus) == (actors, cpus):
            return dataclasses.replace(self, actors=actors), None
        gpus = " and 1 GPU" if use_gpus else ""
        asked = f"{_many(actors, 'engine actor')} × {_many(cpus, 'CPU')}{gpus}"
        verb = "does" if actors == 1 else "do"
        has = _many(cluster_cpus, "CPU") + (
            f" and {_many(cluster_gpus, 'GPU')}" if use_gpus else ""
        )
        if self.address != RAY_LOCAL:
            fewer = fit_actors if use_gpus else int(cluster_cpus // cpus)
            hints = [f"--ray-actors {fewer}"] if 0 < fewer < actors else []
            if fit_cpus < cpus and fit_cpus > 0:
                hints.append(f"--ray-cpus-per-actor {fit_cpus:g}")
            raise EngineError(
                f"--ray: {asked} {verb} not fit a cluster of {has}"
                + (f": use {' or '.join(hints)}" if hints else "")
            )
        note = (
            f"--ray local: {asked} {verb} not fit this machine's {has}: running "
            f"{_many(fit_actors, 'engine actor')} of {_many(fit_cpus, 'CPU')}"
        )
        return dataclasses.replace(self, actors=fit_actors, cpus_per_actor=fit_cpus), note


def _many(count: float, noun: str) -> str:
    return f"{count:g} {noun}{'' if count == 1 else 's'}"


def _cpu_share(cpus: float, actors: int) -> float:
    """CPUs each of `actors` can reserve out of `cpus` (Ray takes whole CPUs above one)."""
    share = cpus / max(1, actors)
    return float(int(share)) if share >= 1 else int(share * 100) / 100
