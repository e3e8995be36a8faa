"""A real local Ray cluster for the `--ray` tests: started once per session with more logical
CPUs than this machine has cores, a small object store and no dashboard; stopped at the end
(ray.shutdown ends the processes it started, and only those)."""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator

import pytest

from tests.helpers.paths import REPO

CLUSTER_CPUS = 8
OBJECT_STORE_BYTES = 200 * 2**20

_ENV = {
    "RAY_AUTH_MODE": "disabled",
    "OMP_NUM_THREADS": "1",
    # Actor processes import hpdparse from this checkout, whatever the environment installed.
    "PYTHONPATH": os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH")) if p),
}


@pytest.fixture(scope="session")
def ray_cluster() -> Iterator[str]:
    """The address of the session's Ray cluster (this process is connected to it)."""
    ray = pytest.importorskip("ray")
    pytest.importorskip("ray.data")
    saved = {key: os.environ.get(key) for key in _ENV}
    os.environ.update(_ENV)
    context = ray.init(
        num_cpus=CLUSTER_CPUS,
        object_store_memory=OBJECT_STORE_BYTES,
        include_dashboard=False,
        logging_level=logging.WARNING,
    )
    try:
        yield context.address_info["gcs_address"]
    finally:
        ray.shutdown()
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
