"""Reading a service's Prometheus page in tests: every sample as (name, labels) → value."""

from __future__ import annotations

import httpx
from prometheus_client.parser import text_string_to_metric_families
from stack import Stack

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


async def scrape(url: str) -> Samples:
    """A /metrics page as (sample name, labels) → value."""
    async with httpx.AsyncClient() as http:
        response = await http.get(url)
    response.raise_for_status()
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(response.text)
        for sample in family.samples
    }


def metrics_url(stack: Stack, service: str) -> str:
    """The ops page of a service started with its own ``metrics_port`` setting."""
    return f"http://127.0.0.1:{stack.service_env[service]['MEMORIA_METRICS_PORT']}/metrics"


def total(samples: Samples, name: str, **labels: str) -> float:
    """The sum of the samples of ``name`` that have these labels (and maybe others)."""
    wanted = set(labels.items())
    return sum(v for (n, found), v in samples.items() if n == name and wanted <= found)
