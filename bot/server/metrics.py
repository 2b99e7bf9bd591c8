"""Prometheus metrics of one process: deliveries, jobs, run durations, tokens, cost."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

if TYPE_CHECKING:
    from bot.jobs import RunFigures


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

    def record_run(self, figures: RunFigures) -> None:
        """Count one finished agent run: every runner (serve, worker, the Modal app) records through this."""
        self.run_seconds.labels(figures.state).observe(figures.seconds)
        for kind, value in figures.tokens.items():
            self.tokens.labels(kind).inc(value)
        self.cost.inc(figures.cost_usd)
