"""The cockpit against servers it can't use: unreachable, untrusted, an engine not up yet,
answers with warnings; `cockpit check` on each; label values typed in the UI.

Everything goes through the user-facing layers: the app under Pilot on the real feeds built
from a Config, and the real `cockpit check` command.
"""

from __future__ import annotations

import re
import subprocess
import sys
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import pytest
import yaml

from cockpit.sources.prometheus import PrometheusSource, SourceError
from cockpit.widgets import CacheGauge
from tests.support.cli import run_cockpit
from tests.support.faultlane import (
    FAILURES,
    JOB,
    LANE_HIT_RATE,
    LATE_JOB,
    MODELS,
    QUOTED,
    QUOTED_PREFIX,
    REFRESH_S,
    Exporter,
    break_proxy,
    error_notices,
    fresh_with,
    hit_rate_row,
    lane_config,
    lane_reason,
    lane_state,
    running_app,
    share_text,
    shared_lane_prometheus,
    start_exporter,
    status_text,
    take_late_port,
    vector,
    wait_until,
)
from tests.support.faultproxy import FaultProxy
from tests.support.promharness import PromServer, free_port
from tests.support.repo import REPO, VLLM_FIXTURES, require_binary
from tests.support.tls import TLS_REASON, AnswerAnything, serving_tls

pytestmark = pytest.mark.prometheus


@pytest.fixture(scope="module")
def prom(tmp_path_factory: pytest.TempPathFactory) -> PromServer:
    shared: tuple[Exporter, PromServer] = shared_lane_prometheus(
        tmp_path_factory.mktemp("prom-faults")
    )
    return shared[1]


@pytest.fixture
def proxy(prom: PromServer) -> Iterator[FaultProxy]:
    with FaultProxy(prom.url) as proxy:
        yield proxy


# --- transport failures -------------------------------------------------------------------


@pytest.fixture(scope="module")
def tls_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with serving_tls(tmp_path_factory.mktemp("tls"), AnswerAnything) as (url, _):
        yield url


@pytest.mark.parametrize("case", ["connection refused", "self-signed TLS"])
async def test_unreachable_servers_say_why_on_the_pane(case: str, tls_server: str) -> None:
    url = f"http://127.0.0.1:{free_port()}" if case == "connection refused" else tls_server
    reason = "connection refused" if case == "connection refused" else TLS_REASON
    async with running_app(lane_config(url)) as (app, pilot):
        await wait_until(pilot, lambda: lane_state(app) == "missing")
        assert lane_reason(app).endswith(reason)
        assert app.query_one(CacheGauge).border_subtitle.startswith("lane missing: ")
        assert "—" in hit_rate_row(app)
        await pilot.pause(1.2)  # probed once a refresh meanwhile, never faster
        assert app.lane_pollers[0].failures >= 1
        assert app.is_running and error_notices(app) == []


async def test_an_engine_that_comes_up_late_shows_at_the_next_refresh(prom: PromServer) -> None:
    """Prometheus already scrapes the lane's job, but the engine is still loading: only `up` and
    `scrape_*` exist. The lane is missing with that reason, asked again every refresh (not
    backed off), and shows as soon as the engine's own series arrive."""
    selector = f'job="{LATE_JOB}"'
    async with running_app(lane_config(prom.url, selector=selector)) as (app, pilot):
        await wait_until(pilot, lambda: lane_state(app) == "missing")
        assert re.search(r"no vllm:.* sglang:.* metrics found", lane_reason(app))
        await pilot.pause(5 * REFRESH_S)  # a backed-off poller would wait 8 refreshes by now
        assert app.lane_pollers[0].delay == REFRESH_S
        # The same when the config names the engine: not taken for one that lacks every metric.
        source = PrometheusSource(prom.url)
        with pytest.raises(SourceError, match=r"no vllm:.* sglang:.* metrics") as absent:
            await source.read_lane("late", "vllm", selector, 300.0)
        await source.aclose()
        assert absent.value.engine_absent is True
        exporter = start_exporter(take_late_port())
        try:
            up = time.perf_counter()
            await wait_until(pilot, lambda: lane_state(app) == "ok")
            print(f"\nengine up, lane shown: {time.perf_counter() - up:.2f} s")
        finally:
            exporter.stop()
        assert error_notices(app) == []


def write_config(path: Path, lanes: list[dict[str, Any]]) -> Path:
    path.write_text(yaml.safe_dump({"lanes": lanes, "window": "5m"}, sort_keys=False))
    return path


def test_cockpit_check_gives_each_failure_its_one_line_reason(
    prom: PromServer, tls_server: str, tmp_path: Path
) -> None:
    proxies = {case: FaultProxy(prom.url).start() for case in FAILURES}
    try:
        lanes: list[dict[str, Any]] = [
            {"name": "good", "prometheus": prom.url, "selector": f'job="{JOB}"'},
            {"name": "refused", "prometheus": f"http://127.0.0.1:{free_port()}"},
            {"name": "tls", "prometheus": tls_server},
        ]
        for index, (case, proxy) in enumerate(proxies.items()):
            break_proxy(proxy, FAILURES[case][0])
            lanes.append({"name": f"case{index}", "prometheus": proxy.url,
                          "selector": f'job="{JOB}"'})  # fmt: skip
        config = write_config(tmp_path / "config.yaml", lanes)
        result = run_cockpit("check", "--config", str(config))
    finally:
        for proxy in proxies.values():
            proxy.stop()
    assert result.returncode == 1, result.stderr
    assert "Traceback" not in result.stdout + result.stderr
    lines = result.stdout.splitlines()
    by_lane = {
        line.split()[2].rstrip(":"): line for line in lines if line.startswith(("ok", "FAIL"))
    }
    assert by_lane["good"].startswith("ok ")
    assert by_lane["refused"].startswith("FAIL") and by_lane["refused"].endswith(
        "connection refused"
    )
    assert by_lane["tls"].startswith("FAIL") and by_lane["tls"].endswith(TLS_REASON)
    for index, case in enumerate(proxies):
        line = by_lane[f"case{index}"]
        assert line.startswith("FAIL") and FAILURES[case][1] in line, (case, line)


class _Exposition(BaseHTTPRequestHandler):
    body = (VLLM_FIXTURES / "metrics_real.txt").read_bytes()

    def log_message(self, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/plain; version=0.0.4")
        self.send_header("Content-Length", str(len(self.body)))
        self.end_headers()
        self.wfile.write(self.body)


def test_a_direct_scrape_over_https_trusts_its_ca_file_or_verify_tls(tmp_path: Path) -> None:
    with serving_tls(tmp_path, _Exposition) as (url, cert):
        lanes: list[dict[str, Any]] = [
            {"name": "untrusted", "metrics_url": f"{url}/metrics"},
            {"name": "ca", "metrics_url": f"{url}/metrics", "ca_file": str(cert)},
            {"name": "unverified", "metrics_url": f"{url}/metrics", "verify_tls": False},
        ]
        result = run_cockpit("check", "--config", str(write_config(tmp_path / "c.yaml", lanes)))
    said = {line.split()[2].rstrip(":"): line for line in result.stdout.splitlines()
            if line.startswith(("ok", "FAIL"))}  # fmt: skip
    assert said["untrusted"].startswith("FAIL") and said["untrusted"].endswith(TLS_REASON)
    assert said["ca"].startswith("ok ") and said["unverified"].startswith("ok "), result.stdout


UNKNOWN_HOST_SCRIPT = """
import asyncio, sys
sys.path[:0] = {paths!r}
from tests.support.faultlane import hit_rate_row, lane_config, lane_reason, lane_state
from tests.support.faultlane import running_app, wait_until
async def main():
    async with running_app(lane_config("http://nonexistent.invalid:9090")) as (app, pilot):
        await wait_until(pilot, lambda: lane_state(app) == "missing")
        print(lane_reason(app))
        print(app.query_one("#cache").border_subtitle)
        print(hit_rate_row(app))
asyncio.run(main())
"""


def test_unknown_host_fails_locally_with_a_reason(tmp_path: Path) -> None:
    """In a network namespace of its own: the failed lookup can't leave the machine."""
    require_binary("unshare")
    isolated = ("unshare", "--net")
    if subprocess.run([*isolated, "true"], capture_output=True).returncode != 0:
        pytest.skip("unshare --net is not permitted here")
    script = UNKNOWN_HOST_SCRIPT.format(paths=[str(REPO)])
    shown = subprocess.run(
        [*isolated, sys.executable, "-c", script], capture_output=True, text=True, timeout=60
    )
    assert shown.returncode == 0, shown.stderr
    reason, subtitle, row = shown.stdout.splitlines()[-3:]
    assert reason == "http://nonexistent.invalid:9090: unknown host"
    assert subtitle.startswith(f"lane missing: {reason}")
    assert row.rstrip().endswith("—")

    config = write_config(
        tmp_path / "config.yaml", [{"name": "far", "prometheus": "http://nonexistent.invalid:9090"}]
    )
    result = run_cockpit("check", "--config", str(config), prefix=isolated)
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert result.stdout.splitlines()[-1] == (
        "FAIL lane far: http://nonexistent.invalid:9090: unknown host"
    )


async def test_a_warning_in_the_answer_is_said_on_the_pane_and_in_check(
    proxy: FaultProxy, tmp_path: Path
) -> None:
    warning = "partial response: store 10.0.0.7 unreachable"
    proxy.canned["/api/v1/query"] = vector(
        {"prefix_cache_hits": "300", "prefix_cache_queries": "400"}, [warning, "another"]
    )
    async with running_app(lane_config(proxy.url)) as (app, pilot):
        await wait_until(pilot, lambda: app.lane_snapshot is not None)
        assert lane_state(app) == "ok"
        assert share_text(300, 400) in hit_rate_row(app)  # the figures are what was answered
        note = f"server warning: {warning} (+1 more)"
        assert lane_reason(app) == note
        assert app.query_one(CacheGauge).border_subtitle.startswith(f"lane: {note}")
        assert note in str(app.query_one(CacheGauge).tooltip)
        assert "lane ok" in status_text(app) and "server warning" in status_text(app)
    config = write_config(
        tmp_path / "c.yaml", [{"name": "w", "prometheus": proxy.url, "selector": f'job="{JOB}"'}]
    )
    result = run_cockpit("check", "--config", str(config))
    assert result.returncode == 0
    assert f", {note}" in result.stdout.splitlines()[-1]


# --- label values typed in the UI -------------------------------------------------------


def model_rate(model: str) -> str:
    hits, queries, _ = MODELS[model]
    return share_text(hits, queries)


async def test_model_filters_with_quotes_backslashes_and_newlines_match_exactly(
    prom: PromServer,
) -> None:
    assert len({model_rate(m) for m in MODELS} | {LANE_HIT_RATE}) == len(MODELS) + 1
    async with running_app(lane_config(prom.url)) as (app, pilot):
        await wait_until(pilot, lambda: fresh_with(app, LANE_HIT_RATE))
        # typed: a quote and a backslash, through the `m` key's input
        await pilot.press("m")
        await pilot.pause()
        await pilot.press(*QUOTED_PREFIX)
        await pilot.press("enter")
        await wait_until(pilot, lambda: fresh_with(app, model_rate(QUOTED_PREFIX)))
        assert app.lane_feeds[0].model_filter == QUOTED_PREFIX
        # a newline can't be typed into a one-line input: applied as the input would
        for model in (QUOTED, "plain", QUOTED_PREFIX):
            app.filter_model(model)
            await wait_until(pilot, lambda m=model: fresh_with(app, model_rate(m)))  # type: ignore[misc]
            assert error_notices(app) == []
        app.filter_model("")
        await wait_until(pilot, lambda: fresh_with(app, LANE_HIT_RATE))
        app.filter_model('q"uote')  # a prefix of real values matches nothing
        await wait_until(pilot, lambda: app.lane_snapshot is not None)
        assert lane_state(app) == "missing"
        assert "no series match" in lane_reason(app)
        assert "—" in hit_rate_row(app)
