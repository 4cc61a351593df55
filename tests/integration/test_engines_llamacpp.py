"""llama.cpp's `llama-server`: its names detected, its exposition read by `cockpit report
--metrics-url` over two scrapes whose counters differ, and what it cannot give missing with the
reason."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from cockpit import engines
from cockpit.core.fleet import fleet_plan
from cockpit.engines.base import NO_SPECULATION
from tests.support.engine_names import violations
from tests.support.repo import FIXTURES

FIXTURE = FIXTURES / "llamacpp" / "metrics.txt"
LATER = {
    "llamacpp:prompt_tokens_total": "489046",
    "llamacpp:prompt_tokens_cached_total": "6.86e+06",
    "llamacpp:prompt_seconds_total": "257.365",
    "llamacpp:tokens_predicted_total": "131304",
    "llamacpp:tokens_predicted_seconds_total": "2251.33",
    "llamacpp:n_decode_total": "83480",
    "llamacpp:requests_processing": "3",
    "llamacpp:requests_deferred": "1",
}
"""The second scrape: what moved since the fixture, as llama-server prints it (`%g`)."""
LINE = re.compile(r"^(llamacpp:[a-z_]+) (\S+)$", re.MULTILINE)


def values(text: str) -> dict[str, float]:
    return {name: float(value) for name, value in LINE.findall(text)}


def moved_on(text: str) -> str:
    return LINE.sub(lambda m: f"{m.group(1)} {LATER.get(m.group(1), m.group(2))}", text)


class Exposition(BaseHTTPRequestHandler):
    """The fixture at the first GET, the moved-on copy at every one after; each GET's time."""

    texts: list[str]
    served: list[float]

    def do_GET(self) -> None:
        body = self.texts[min(len(self.served), 1)].encode()
        self.served.append(time.time())
        self.send_response(200)
        self.send_header("Content-Type", "text/plain; version=0.0.4")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def served() -> Iterator[tuple[str, list[float]]]:
    text = FIXTURE.read_text()
    handler = type("Served", (Exposition,), {"texts": [text, moved_on(text)], "served": []})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/metrics", handler.served
    finally:
        server.shutdown()
        server.server_close()


def test_its_names_are_detected_as_llamacpp() -> None:
    names = set(values(FIXTURE.read_text()))
    assert engines.detect(names).name == "llamacpp"
    assert engines.detect(names | {"process_cpu_seconds_total"}) is engines.engine("llamacpp")
    assert "llamacpp:" in engines.no_engine_metrics()
    assert violations('if dialect == "llamacpp":\n    pass', "sample.py")


def test_report_reads_its_figures_from_two_scrapes(served: tuple[str, list[float]]) -> None:
    url, times = served
    command = [sys.executable, "-m", "cockpit", "report", "--metrics-url", url, "--window", "5m"]
    run = subprocess.run(
        [*command, "--sample", "1s", "--format", "json"], capture_output=True, text=True, timeout=60
    )
    assert run.returncode == 0, run.stderr
    lane = json.loads(run.stdout)["lane"]
    figures = lane["figures"]
    before, after = values(FIXTURE.read_text()), values(moved_on(FIXTURE.read_text()))

    def moved(name: str) -> float:
        return after[f"llamacpp:{name}"] - before[f"llamacpp:{name}"]

    def value(key: str) -> float:
        assert figures[key]["value"] is not None, (key, figures[key])
        return float(figures[key]["value"])

    assert lane["provenance"]["dialect"] == "llamacpp"
    computed, cached, generated = (
        moved(n)
        for n in ("prompt_tokens_total", "prompt_tokens_cached_total", "tokens_predicted_total")
    )
    assert computed > 0 and cached > 0 and generated > 0
    assert value("prompt_tokens") == pytest.approx(computed + cached)
    assert figures["prompt_tokens"]["note"] == "computed + cached"
    assert value("prefill_computed") == pytest.approx(computed)
    assert value("generation_tokens") == pytest.approx(generated)
    assert value("prefix_cache_hit_rate") == pytest.approx(cached / (cached + computed))
    assert value("effective_prefill_rate") == pytest.approx(
        computed / moved("prompt_seconds_total")
    )
    assert value("stream_tok_s") == pytest.approx(
        generated / moved("tokens_predicted_seconds_total")
    )
    assert value("tokens_per_step") == 1.0 and figures["tokens_per_step"]["note"] == NO_SPECULATION
    assert value("batch_tokens_per_step") == pytest.approx(
        (computed + generated) / moved("n_decode_total")
    )
    watched = times[-1] - times[0]
    assert watched >= 1.0
    assert value("prompt_tok_s") * watched == pytest.approx(computed + cached, rel=0.05)
    assert value("generation_tok_s") * watched == pytest.approx(generated, rel=0.05)
    assert value("running_now") == 3 and value("waiting_now") == 1
    assert value("running") == pytest.approx(2.5)  # both scrapes' busy slots, averaged
    assert figures["running_now"]["note"] == "busy slots"

    def reason(key: str) -> str:
        assert figures[key]["value"] is None, (key, figures[key])
        return str(figures[key]["reason"])

    assert reason("requests") == "llama.cpp counts no requests"
    assert reason("kv_usage_now") == "not exposed by this engine (llamacpp:kv_cache_usage_ratio)"
    assert "per-request histograms" in reason("ttft_mean")
    assert "per-request histograms" in reason("ttft_p50")
    assert "does not preempt" in reason("preemptions")
    assert "context size in /props" in reason("kv_capacity_tokens")
    assert "no decode time" in reason("decode_share")
    assert "FLOP" in reason("measured_flops")


def test_the_fleet_asks_for_llamacpp_lanes_too() -> None:
    plan = fleet_plan("job", "", 3600.0)
    assert "sum by (job) (increase(llamacpp:tokens_predicted_total{}[1h]))" in plan.query
    assert "requests" in plan.unavailable["llamacpp"] and "spec_drafts" in plan.figs["llamacpp"]
