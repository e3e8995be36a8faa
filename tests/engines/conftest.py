"""The vLLM engine tests (tests/engines/vllm and the engines' parity test here) share started
engines: each configuration starts once per test run.

`vllm_engines.get(config)` starts an engine on first use and hands it over, caches emptied, on
later ones (tests/helpers/vllm.py, `EnginePool`). The engines are closed as soon as the last test
of this folder is done, not at the end of the session: later tests start vLLM in processes of
their own (`hpdparse serve`, `hpdparse convert`), and the machine's memory is shared.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers.vllm import EnginePool

_HERE = Path(__file__).resolve().parent
_POOL_KEY = pytest.StashKey[EnginePool]()


@pytest.fixture(scope="session")
def vllm_engines(pytestconfig: pytest.Config) -> Iterator[EnginePool]:
    pool = pytestconfig.stash.setdefault(_POOL_KEY, EnginePool())
    yield pool
    pool.close_all()


@pytest.hookimpl(trylast=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> None:
    """After the last test of this folder (in collection order), close the shared engines."""
    if nextitem is not None and _HERE in Path(nextitem.path).resolve().parents:
        return
    pool = item.config.stash.get(_POOL_KEY, None)
    if pool is not None:
        pool.close_all()
