"""Prometheus metrics, kept in the app and written out in the text format by hand.

    metrics = Metrics()
    app.add_middleware(MetricsMiddleware, metrics=metrics)   # requests and latency per route
    Gateway(..., on_report=metrics.on_report)                # helper calls and their tokens
    metrics.render(queue_depth=gateway.queue.depth)           # the /metrics body

Routes are labelled by their template (``/v1/threads/{thread_id}/memory``), never by the raw
path, so the number of series stays bounded whatever clients send.
"""

from __future__ import annotations

import time
from collections import Counter, defaultdict
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ..llm import Usage
from ..types import UpdateReport

__all__ = ["Metrics", "MetricsMiddleware"]

BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
"""Latency histogram buckets, in seconds."""


@dataclass
class _Histogram:
    counts: list[int] = field(default_factory=lambda: [0] * len(BUCKETS))
    total: float = 0.0
    count: int = 0

    def observe(self, seconds: float) -> None:
        self.total += seconds
        self.count += 1
        for index, bound in enumerate(BUCKETS):
            if seconds <= bound:
                self.counts[index] += 1
                break


class Metrics:
    """The service's counters; one instance per app (no global registry)."""

    def __init__(self) -> None:
        self.requests: Counter[tuple[str, str, str]] = Counter()
        self.latency: defaultdict[tuple[str, str], _Histogram] = defaultdict(_Histogram)
        self.answer_tokens: Counter[str] = Counter()
        self.cache_tokens: Counter[str] = Counter()
        """Of the answers' prompt tokens, those read from and written to the cache."""
        self.answers = 0
        self.helper_calls = 0
        self.helper_tokens: Counter[str] = Counter()
        self.updates: Counter[str] = Counter()

    def observe_request(self, method: str, route: str, status: int, seconds: float) -> None:
        self.requests[(method, route, str(status))] += 1
        self.latency[(method, route)].observe(seconds)

    def observe_answer(self, usage: Usage) -> None:
        """One answer of the upstream model (all its rounds)."""
        self.answers += 1
        self.answer_tokens["prompt"] += usage.prompt_tokens
        self.answer_tokens["completion"] += usage.completion_tokens
        self.cache_tokens["read"] += usage.cached_tokens
        self.cache_tokens["write"] += usage.cache_write_tokens

    def on_report(self, report: UpdateReport) -> None:
        """The gateway's `on_report`: one background memory update."""
        self.updates[report.outcome.value] += 1
        self.helper_calls += report.helper_calls
        self.helper_tokens["prompt"] += report.prompt_tokens
        self.helper_tokens["completion"] += report.completion_tokens

    def render(
        self, *, queue_depth: int, queue_failures: int, pool: Mapping[str, int] | None = None
    ) -> str:
        """The Prometheus text exposition (version 0.0.4); `pool`: the store's connection
        pool (`PooledStore.pool_stats`), None for a store without one."""
        out: list[str] = []
        _family(
            out,
            "workingmem_http_requests_total",
            "counter",
            "HTTP requests by route and status.",
            (
                (_labels(method=method, route=route, status=status), count)
                for (method, route, status), count in sorted(self.requests.items())
            ),
        )
        _family(
            out,
            "workingmem_http_request_duration_seconds",
            "histogram",
            "HTTP request latency, until the last byte, by route.",
            (
                line
                for (method, route), hist in sorted(self.latency.items())
                for line in _histogram(method, route, hist)
            ),
        )
        _family(
            out,
            "workingmem_answers_total",
            "counter",
            "Answers of the upstream model.",
            [("", self.answers)],
        )
        _family(
            out,
            "workingmem_answer_tokens_total",
            "counter",
            "Tokens of the answering model.",
            ((_labels(kind=kind), self.answer_tokens[kind]) for kind in _TOKEN_KINDS),
        )
        _family(
            out,
            "workingmem_answer_cache_tokens_total",
            "counter",
            "Prompt tokens of the answering model the upstream read from (read) or wrote to "
            "(write) its prompt cache.",
            ((_labels(kind=kind), self.cache_tokens[kind]) for kind in _CACHE_KINDS),
        )
        _family(
            out,
            "workingmem_helper_calls_total",
            "counter",
            "Helper (cheap model) calls.",
            [("", self.helper_calls)],
        )
        _family(
            out,
            "workingmem_helper_tokens_total",
            "counter",
            "Tokens of helper calls.",
            ((_labels(kind=kind), self.helper_tokens[kind]) for kind in _TOKEN_KINDS),
        )
        _family(
            out,
            "workingmem_memory_updates_total",
            "counter",
            "Background memory updates by outcome.",
            ((_labels(outcome=outcome), n) for outcome, n in sorted(self.updates.items())),
        )
        _family(
            out,
            "workingmem_background_queue_depth",
            "gauge",
            "Memory updates waiting or running.",
            [("", queue_depth)],
        )
        _family(
            out,
            "workingmem_background_failures_total",
            "counter",
            "Background jobs that failed.",
            [("", queue_failures)],
        )
        if pool is not None:
            _render_pool(out, pool)
        return "\n".join(out) + "\n"


_TOKEN_KINDS = ("prompt", "completion")
_CACHE_KINDS = ("read", "write")


def _family(
    out: list[str], name: str, kind: str, help_text: str, series: Iterable[tuple[str, object]]
) -> None:
    """A metric family: its help and type, then a line per series (the name's suffix and
    labels, and the value)."""
    out.append(f"# HELP {name} {help_text}")
    out.append(f"# TYPE {name} {kind}")
    out.extend(f"{name}{tail} {value}" for tail, value in series)


def _histogram(method: str, route: str, hist: _Histogram) -> Iterator[tuple[str, object]]:
    """One route's latency series: its cumulative buckets, its sum and its count."""
    cumulative = 0
    for bound, count in zip(BUCKETS, hist.counts, strict=True):
        cumulative += count
        yield "_bucket" + _labels(method=method, route=route, le=_number(bound)), cumulative
    yield "_bucket" + _labels(method=method, route=route, le="+Inf"), hist.count
    yield "_sum" + _labels(method=method, route=route), _number(hist.total)
    yield "_count" + _labels(method=method, route=route), hist.count


_POOL_FAMILIES = (
    ("max_connections", "gauge", "The most connections the pool opens.", "pool_max"),
    ("waiting_requests", "gauge", "Requests waiting for a connection.", "requests_waiting"),
    ("requests_total", "counter", "Connections asked of the pool.", "requests_num"),
    ("request_errors_total", "counter", "Requests that got no connection.", "requests_errors"),
)
"""The pool's families of one series: (name's suffix, type, help, psycopg_pool's key)."""


def _render_pool(out: list[str], pool: Mapping[str, int]) -> None:
    """The database pool's families: what a pool too small, or losing connections, shows."""
    size, idle = pool.get("pool_size", 0), pool.get("pool_available", 0)
    _family(
        out,
        "workingmem_db_pool_connections",
        "gauge",
        "Database connections open, by state.",
        [(_labels(state="idle"), idle), (_labels(state="in_use"), size - idle)],
    )
    for suffix, kind, help_text, key in _POOL_FAMILIES:
        _family(out, f"workingmem_db_pool_{suffix}", kind, help_text, [("", pool.get(key, 0))])
    _family(
        out,
        "workingmem_db_pool_wait_seconds_total",
        "counter",
        "Time requests waited.",
        [("", _number(pool.get("requests_wait_ms", 0) / 1000))],
    )
    _family(
        out,
        "workingmem_db_pool_discarded_total",
        "counter",
        "Connections the pool closed, by why.",
        [
            (_labels(reason="returned_broken"), pool.get("returns_bad", 0)),
            (_labels(reason="lost"), pool.get("connections_lost", 0)),
        ],
    )


def _labels(**labels: str) -> str:
    inner = ",".join(f'{key}="{_escape(value)}"' for key, value in labels.items())
    return "{" + inner + "}"


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _number(value: float) -> str:
    return repr(float(value))


class MetricsMiddleware:
    """Counts every HTTP request by method, route template and status, with its latency."""

    def __init__(self, app: ASGIApp, *, metrics: Metrics) -> None:
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status = 500

        async def send_status(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
            await send(message)

        try:
            await self.app(scope, receive, send_status)
        finally:
            route = scope.get("route")
            template = getattr(route, "path_format", None) or "unmatched"
            self.metrics.observe_request(
                scope["method"], template, status, time.perf_counter() - started
            )
