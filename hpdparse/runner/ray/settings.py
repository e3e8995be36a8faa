"""The settings of a `--ray` run (on top of `ConvertSettings`): where the cluster is and how the
work is cut and spread. No Ray import here."""

from __future__ import annotations

from dataclasses import dataclass

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
    actors: int = 0  # engine actors; 0: one per GPU, or one per cpus_per_actor CPUs
    cpus_per_actor: float = DEFAULT_CPUS_PER_ACTOR
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
