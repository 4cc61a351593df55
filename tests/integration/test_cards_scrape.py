"""Cards on a lane read by direct scrape, through the real `cockpit card` commands: the counts
are the deltas between the engine's scrapes at the card's edges, the rates are over the card's
own seconds, and a kept card outlives its engine."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from cockpit.demo.lane import SimulatedLane, serve_metrics
from tests.support.cli import COCKPIT
from tests.support.loopback import line_sum


def card(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "XDG_DATA_HOME": str(home), "HOME": str(home)}
    return subprocess.run(
        [COCKPIT, "card", *args], capture_output=True, text=True, timeout=60, env=env
    )


def figures(shown: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    assert shown.returncode == 0, shown.stderr
    return dict(json.loads(shown.stdout)["lane"]["figures"])


class ServedLane(SimulatedLane):
    """The simulated lane served on loopback; it moves only when stepped."""

    address = ""

    @property
    def served(self) -> str:
        return self.address


@pytest.fixture
def lane() -> Any:
    simulated = ServedLane(seed=11, warm_start=600.0)
    server, _ = serve_metrics(simulated.registry, 0)
    simulated.address = f"http://127.0.0.1:{server.server_address[1]}/metrics"
    yield simulated
    server.shutdown()


def test_a_card_counts_exactly_between_its_edge_scrapes(lane: Any, tmp_path: Path) -> None:
    before = lane.render()
    started = card(tmp_path, "start", "run-1", "--metrics-url", lane.served, "--note", "rate 2")
    assert started.returncode == 0, started.stderr
    assert "card run-1 started on lane lane" in started.stdout
    lane.step(30.0)
    after = lane.render()
    stopped = card(tmp_path, "stop", "--metrics-url", lane.served, "--format", "json")
    found = figures(stopped)
    requests = line_sum(after, "vllm:request_success_total") - line_sum(
        before, "vllm:request_success_total"
    )
    generated = line_sum(after, "vllm:generation_tokens_total") - line_sum(
        before, "vllm:generation_tokens_total"
    )
    assert requests > 0
    assert found["requests"]["value"] == requests  # exact, not extrapolated
    assert found["generation_tokens"]["value"] == generated
    data = json.loads(stopped.stdout)
    seconds = data["card"]["duration_s"]
    assert found["requests_per_s"]["value"] == pytest.approx(requests / seconds)
    assert data["card"]["name"] == "run-1" and data["card"]["lane"] == "lane"
    assert data["card"]["start"].endswith("Z") and data["card"]["end"].endswith("Z")
    assert "between the engine's scrapes at" in data["card"]["edges"]


def test_a_kept_card_outlives_its_engine(lane: Any, tmp_path: Path) -> None:
    assert card(tmp_path, "start", "kept", "--metrics-url", lane.served).returncode == 0
    lane.step(20.0)
    kept = figures(card(tmp_path, "stop", "kept", "--metrics-url", lane.served, "--format", "json"))
    # The engine is gone: the card is shown as kept, from the store alone.
    shown = card(tmp_path, "show", "kept", "--format", "json")
    assert figures(shown)["requests"] == kept["requests"]
    text = card(tmp_path, "show", "kept")
    assert text.returncode == 0 and "# Card kept — lane lane" in text.stdout
    assert "Requests completed" in text.stdout


def test_card_commands_refuse_what_cant_be_done(lane: Any, tmp_path: Path) -> None:
    none_running = card(tmp_path, "stop", "--metrics-url", lane.served)
    assert none_running.returncode == 2
    assert none_running.stderr == "cockpit card: no card is running\n"
    assert card(tmp_path, "start", "twice", "--metrics-url", lane.served).returncode == 0
    again = card(tmp_path, "start", "twice", "--metrics-url", lane.served)
    assert again.returncode == 2 and "a card named 'twice' exists already" in again.stderr
    unknown = card(tmp_path, "show", "nope")
    assert unknown.returncode == 2 and "no card named 'nope'" in unknown.stderr
    past = card(
        tmp_path, "add", "old", "--metrics-url", lane.served, "--from", "-2h", "--to", "-1h"
    )
    assert past.returncode == 2 and "needs a Prometheus lane" in past.stderr
    assert "Traceback" not in none_running.stderr + again.stderr + unknown.stderr + past.stderr


def test_a_card_name_from_outside_is_shown_as_data(lane: Any, tmp_path: Path) -> None:
    refused = card(tmp_path, "start", "bad\x1b]0;x\x07name", "--metrics-url", lane.served)
    assert refused.returncode == 2 and "\x1b" not in refused.stderr
    noted = card(tmp_path, "start", "a|b", "--metrics-url", lane.served, "--note", "x\x1bq")
    assert noted.returncode == 0, noted.stderr
    listed = card(tmp_path, "list")
    assert listed.returncode == 0 and "\x1b" not in listed.stdout
    assert "a\\|b" in listed.stdout and "x␛q" in listed.stdout
