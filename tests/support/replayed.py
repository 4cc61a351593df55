"""A fixture exposition replayed as a short history: nine scrapes 15 s apart, counters grown
linearly to their values, read through Prometheus (`history`) or a direct scrape (`scraped`)."""

from __future__ import annotations

import re

from prometheus_client.parser import text_string_to_metric_families

from cockpit.core.model import LaneTotals
from cockpit.sources.scrape import ScrapeSource
from tests.support.promharness import OpenMetricsWriter

STEP = 15
SCRAPES = 9
START = 1_800_000_000
END = START + STEP * (SCRAPES - 1)
WINDOW = 90.0
SAMPLE = re.compile(r"^(\S+?)(\{[^}]*\})? (\S+)$")


def at_step(text: str, k: int) -> str:
    """The exposition `k` scrapes in: counters grown linearly to their value at the last one,
    gauges as they are; `_created` left out (as in a multiprocess engine)."""
    lines = []
    for line in text.splitlines():
        match = SAMPLE.match(line)
        if match and match.group(1).endswith("_created"):
            continue
        if match and re.search(r"_(total|sum|count|bucket)$", match.group(1)):
            value = float(match.group(3)) * k / (SCRAPES - 1)
            line = f"{match.group(1)}{match.group(2) or ''} {value!r}"
        lines.append(line)
    return "\n".join(lines) + "\n"


def history(texts: dict[str, str]) -> OpenMetricsWriter:
    writer = OpenMetricsWriter()
    for job, text in texts.items():
        for k in range(SCRAPES):
            for family in text_string_to_metric_families(at_step(text, k)):
                for sample in family.samples:
                    labels = {**sample.labels, "job": job}
                    stamp = START + STEP * k
                    writer.add(
                        family.name, family.type, sample.name, labels, [(stamp, sample.value)]
                    )
    return writer


def scraped(text: str) -> LaneTotals:
    source = ScrapeSource("http://127.0.0.1:1/metrics")
    for k in range(SCRAPES):
        source.ingest(at_step(text, k), START + STEP * k)
    return source.totals("lane", "", WINDOW, END)
