"""Prometheus metrics of one process: deliveries, jobs, run durations, tokens, cost; and who may read them.

/metrics is not public wherever it is served (`decode serve`'s app, `decode worker --port`): with
DECODE_METRICS_TOKEN it wants that bearer token; without one it answers only when the server is bound to a
loopback address (`--host 127.0.0.1`, the default) and the request is not forwarded by a reverse proxy. The
peer's address alone proves nothing: a reverse proxy on the same host connects from loopback, and not every
proxy adds X-Forwarded-For.
"""

from __future__ import annotations

import hmac
import ipaddress
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry, Counter, Histogram, make_wsgi_app
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

if TYPE_CHECKING:
    from bot.run.result import RunResult


class _JobStates(Collector):
    def __init__(self, counts: Callable[[], dict[str, int]]) -> None:
        self._counts = counts

    def collect(self) -> Iterator[GaugeMetricFamily]:
        family = GaugeMetricFamily("decode_jobs", "Jobs in the store by state", labels=["state"])
        for state, n in sorted(self._counts().items()):
            family.add_metric([state], n)
        yield family


class Metrics:
    """The counters and histograms, on a registry of their own (one per app)."""

    def __init__(self, job_counts: Callable[[], dict[str, int]]) -> None:
        self.registry = CollectorRegistry()
        self.deliveries = Counter("decode_deliveries", "Webhook deliveries by outcome", ["outcome"],
                                  registry=self.registry)
        self.run_seconds = Histogram("decode_run_duration_seconds", "Wall time of finished jobs", ["state"],
                                     buckets=(10, 30, 60, 120, 300, 600, 1200, 1800, 3600, float("inf")),
                                     registry=self.registry)
        self.tokens = Counter("decode_tokens", "Model tokens used", ["kind"], registry=self.registry)
        self.cost = Counter("decode_cost_usd", "Model cost in USD", registry=self.registry)
        self.registry.register(_JobStates(job_counts))

    def record_run(self, result: RunResult) -> None:
        """Count one finished agent run (a result with figures): every runner (serve, worker, the Modal app)
        records through this. The token kinds keep their label values: input, output, cache_read, cache_write."""
        figures = result.figures
        if figures is None:
            return
        self.run_seconds.labels(result.state).observe(figures.seconds)
        u = figures.usage
        for kind, value in (("input", u.input_tokens), ("output", u.output_tokens),
                            ("cache_read", u.cache_read_tokens), ("cache_write", u.cache_creation_tokens)):
            self.tokens.labels(kind).inc(value)
        self.cost.inc(figures.cost_usd)


def loopback(host: str | None) -> bool:
    """Whether a server bound to `host` is reachable from this machine only (None: the bind is not known)."""
    if host == "localhost":
        return True
    try:
        address = ipaddress.ip_address(host or "")
    except ValueError:
        return False
    mapped = getattr(address, "ipv4_mapped", None)
    return (mapped or address).is_loopback


def metrics_refusal(token: str | None, authorization: str, bind: str | None,
                    proxied: bool = False) -> tuple[int, str] | None:
    """Why a /metrics request is refused (status, text), or None to answer it: the bearer `token` when one
    is set, else a server bound to loopback (`bind`, its listening host) that no reverse proxy forwards
    to (`proxied`)."""
    if token:
        scheme, _, given = authorization.partition(" ")
        if scheme.lower() == "bearer" and hmac.compare_digest(given.strip().encode(), token.encode()):
            return None
        return 401, "/metrics needs Authorization: Bearer <DECODE_METRICS_TOKEN>\n"
    if loopback(bind) and not proxied:
        return None
    return 403, ("/metrics needs DECODE_METRICS_TOKEN (scrape with it as a bearer token) unless the server is "
                 "bound to loopback (--host 127.0.0.1) and not behind a reverse proxy\n")


def guarded_app(registry: CollectorRegistry, token: str | None, bind: str | None) -> Callable[..., Iterable[bytes]]:
    """A WSGI app serving `registry` under the same rule as `decode serve`'s /metrics (`decode worker --port`,
    listening on `bind`)."""
    inner = make_wsgi_app(registry)

    def app(environ: dict, start_response: Callable) -> Iterable[bytes]:
        proxied = "HTTP_X_FORWARDED_FOR" in environ or "HTTP_FORWARDED" in environ
        refusal = metrics_refusal(token, environ.get("HTTP_AUTHORIZATION", ""), bind, proxied)
        if refusal is None:
            return inner(environ, start_response)
        status, text = refusal
        headers = [("Content-Type", "text/plain; charset=utf-8")]
        if status == 401:
            headers.append(("WWW-Authenticate", 'Bearer realm="metrics"'))
        start_response(f"{status} {'Unauthorized' if status == 401 else 'Forbidden'}", headers)
        return [text.encode()]

    return app
