"""The scripted engine that runner tests use keeps the `Engine.run` contract of the real ones:
lazy pulls bounded by max_in_flight, results for every request, and a live source's None."""

from __future__ import annotations

from collections.abc import Iterator

from hpdparse.engines.base import PageRequest
from tests.helpers.scripted_engine import ScriptedEngine, scripted_stream


def test_a_live_source_that_yields_none_is_asked_again_later() -> None:
    log: list[str] = []

    def source() -> Iterator[PageRequest | None]:
        for item in ("a", None, "b", "c", None, None, "d"):
            log.append(f"pull {item}")
            yield None if item is None else PageRequest(item, item)

    engine = ScriptedEngine(fail={1})
    for result in engine.run(source(), max_in_flight=8):
        log.append(f"result {result.key} {result.finish_reason}")
        if result.ok:
            assert result.text == scripted_stream(result.key)
    assert log == [
        "pull a", "pull None", "result a stop",  # None: decode what is in, ask again later
        "pull b", "pull c", "pull None", "result b error", "result c stop",
        "pull None", "pull d", "result d stop",  # nothing in flight: asked again at once
    ]  # fmt: skip
    assert engine.nones == 3


def test_pulls_stay_within_max_in_flight_and_complete_in_the_scripted_order() -> None:
    pulled: list[int] = []

    def source() -> Iterator[PageRequest]:
        for n in range(5):
            pulled.append(n)
            yield PageRequest(n, str(n))

    engine = ScriptedEngine(order="reverse")
    keys = []
    for result in engine.run(source(), max_in_flight=2):
        keys.append(result.key)
        assert len(pulled) - len(keys) + 1 <= 2  # in flight, this result included
    assert keys == [1, 0, 3, 2, 4] and engine.max_in_flight_seen == 2
