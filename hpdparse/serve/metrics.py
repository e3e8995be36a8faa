"""`GET /metrics`: the server's Prometheus metrics (one registry per server)."""

from __future__ import annotations

from collections.abc import Callable, Mapping

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from hpdparse.engines.base import PageResult

CONTENT_TYPE = CONTENT_TYPE_LATEST
StatusCounts = Callable[[], Mapping[str, int]]  # how many documents have each status (0s too)
# Seconds from a page's request being accepted to its answer (vLLM's end-to-end buckets, trimmed).
LATENCY_BUCKETS = (0.1, 0.25, 0.5, 1, 2, 5, 10, 20, 30, 60, 120, 300, 600)
# Status label of a request whose client closed the connection before its answer (nginx's code).
CLIENT_CLOSED = 499
# Counters summed over pages: the PageResult field or stat, the metric, its help.
_PAGE_COUNTERS = (
    ("prompt_tokens", "hpdparse_prompt_tokens", "Prompt tokens of decoded pages"),
    ("output_tokens", "hpdparse_output_tokens", "Tokens decoded (children included)"),
    ("forks", "hpdparse_forks", "Child branches forked at <FORK>"),
    (
        "child_prompt_tokens",
        "hpdparse_prefix_cache_queries",
        "Prompt tokens of child branches looked up in the prefix cache",
    ),
    (
        "cached_tokens",
        "hpdparse_prefix_cache_hits",
        "Prompt tokens of child branches served from the prefix cache",
    ),
    ("drafted_tokens", "hpdparse_spec_decode_draft_tokens", "Tokens drafted by the P-MTP head"),
    (
        "accepted_tokens",
        "hpdparse_spec_decode_accepted_tokens",
        "Drafted tokens the model accepted",
    ),
)


class ServeMetrics:
    """Counters the HTTP side and the engine loop update, and gauges read at scrape time."""

    def __init__(
        self,
        *,
        in_engine: Callable[[], int],
        queued: Callable[[], int],
        waiting: Callable[[], int],
        up: Callable[[], bool],
        documents: StatusCounts,
    ) -> None:
        self.registry = registry = CollectorRegistry()
        self._requests = Counter(
            "hpdparse_requests",
            "HTTP requests answered, by route and status (499: the client left first)",
            ["route", "status"],
            registry=registry,
        )
        gauges = {
            "hpdparse_pages_in_flight": ("Pages inside the engine", in_engine),
            "hpdparse_pages_queued": ("Pages prepared and waiting for the engine", queued),
            "hpdparse_requests_waiting": ("Requests waiting for room in the queue", waiting),
            "hpdparse_engine_up": ("1 while the engine is up and taking pages", lambda: up()),
        }
        for name, (text, read) in gauges.items():
            Gauge(name, text, registry=registry).set_function(read)
        self._latency = Histogram(
            "hpdparse_page_seconds",
            "Seconds from a page's request being accepted to its answer",
            buckets=LATENCY_BUCKETS,
            registry=registry,
        )
        self._pages = Counter(
            "hpdparse_pages",
            "Pages decoded, by finish reason",
            ["finish_reason"],
            registry=registry,
        )
        self._counters = {
            stat: Counter(name, text, registry=registry) for stat, name, text in _PAGE_COUNTERS
        }
        self._documents = Gauge(
            "hpdparse_documents", "Documents in the store, by status", ["status"], registry=registry
        )
        self._count_documents = documents

    def count_request(self, route: str, status: int) -> None:
        self._requests.labels(route=route, status=str(status)).inc()

    def observe_page(self, result: PageResult, seconds: float) -> None:
        """A page the engine finished (cancelled pages are not counted)."""
        self._latency.observe(seconds)
        self._pages.labels(finish_reason=result.finish_reason).inc()
        values = {
            **result.stats,
            "prompt_tokens": result.prompt_tokens,
            "output_tokens": result.output_tokens,
        }
        for stat, counter in self._counters.items():
            value = values.get(stat)
            if isinstance(value, (int, float)) and value > 0:
                counter.inc(value)

    def render(self) -> bytes:
        for status, documents in self._count_documents().items():
            self._documents.labels(status=status).set(documents)
        return generate_latest(self.registry)
