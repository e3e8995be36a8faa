"""Run an engine with `PageRequest.on_tokens` set on every page and record what it streams."""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Iterator
from typing import Any

from hpdparse.engines.base import Engine, PageRequest, PageResult


def run_streaming(
    engine: Engine, pages: Iterable[tuple[Hashable, Any]], max_in_flight: int = 4
) -> tuple[dict[Hashable, PageResult], dict[Hashable, list[list[int]]]]:
    """Decode `pages` ((key, image) pairs); return the results and, per page, the token ids of
    each `on_tokens` call in order. Checks on the way that every call has ids, comes from the
    thread iterating the results and before the page's result."""
    import threading

    prepare = engine.preparer()
    calls: dict[Hashable, list[list[int]]] = {}
    returned: set[Hashable] = set()
    thread = threading.get_ident()

    def recorder(key: Hashable) -> Callable[[list[int]], None]:
        def on_tokens(token_ids: list[int]) -> None:
            assert threading.get_ident() == thread, f"page {key}: called from another thread"
            assert key not in returned, f"page {key}: tokens streamed after its result"
            assert token_ids and all(isinstance(t, int) for t in token_ids), (key, token_ids)
            calls[key].append(list(token_ids))

        return on_tokens

    def requests() -> Iterator[PageRequest]:
        for key, image in pages:
            calls[key] = []
            yield PageRequest(key, prepare(image), on_tokens=recorder(key))

    results: dict[Hashable, PageResult] = {}
    for result in engine.run(requests(), max_in_flight):
        assert result.key not in results, f"page {result.key} came back twice"
        returned.add(result.key)
        results[result.key] = result
    return results, calls


def joined(calls: list[list[int]]) -> list[int]:
    """The ids of all calls for one page, in order."""
    return [token for call in calls for token in call]
