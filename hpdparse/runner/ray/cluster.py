"""Connecting to the Ray cluster of a `--ray` run: the one place hpdparse imports Ray."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
from types import ModuleType

from hpdparse.errors import EngineError
from hpdparse.runner.ray.settings import RAY_AUTO, RAY_LOCAL

RAY_REQUIREMENT = "ray[data]>=2.60,<2.61"


def import_ray() -> ModuleType:
    """`ray`, with Ray Data; a one-line EngineError when it is not installed."""
    try:
        import ray
        import ray.data
    except ImportError as exc:
        missing = f" (cannot import {exc.name})" if exc.name else ""
        raise EngineError(
            f"--ray needs Ray Data ({RAY_REQUIREMENT}): pip install 'hpdparse[ray]'{missing}"
        ) from None
    return ray


@contextlib.contextmanager
def connected(address: str, verbose: bool = False) -> Iterator[ModuleType]:
    """Ray, connected to the cluster at `address` (RAY_LOCAL starts one on this machine for the
    run, RAY_AUTO joins the running one); a process already connected keeps its connection."""
    ray = import_ray()
    if ray.is_initialized():
        yield ray
        return
    options = {
        "logging_level": logging.INFO if verbose else logging.WARNING,
        "log_to_driver": True,  # an actor's last words (why its engine died) reach the user
    }
    try:
        if address == RAY_LOCAL:
            ray.init(include_dashboard=False, **options)
        else:
            ray.init(address="auto" if address == RAY_AUTO else address, **options)
    except (ConnectionError, RuntimeError, ValueError) as exc:
        where = "the running cluster" if address == RAY_AUTO else address
        raise EngineError(
            f"--ray: cannot connect to Ray at {where}: {' '.join(str(exc).split())}"
        ) from None
    try:
        yield ray
    finally:
        ray.shutdown()
