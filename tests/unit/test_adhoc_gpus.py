"""`--gpus N` for an ad-hoc lane: the lane's roof is N GPUs (ideal tensor parallelism), as a
config file's `gpus:` makes it; a mistake names the flag."""

from __future__ import annotations

import pytest

from cockpit.cli.main import effective_config, main, parse_args
from cockpit.roofline.profiles import find_hardware
from cockpit.runtime.feeds import build_lane_feeds

LANE = ["--metrics-url", "http://127.0.0.1:9/metrics", "--hardware", "h100",
        "--model", "llama-3.1-8b"]  # fmt: skip


@pytest.mark.parametrize("command", ["run", "report", "check"])
def test_an_adhoc_lane_runs_on_the_gpus_given(command: str) -> None:
    config = effective_config(parse_args([command, *LANE, "--gpus", "2"]))
    (feed,) = build_lane_feeds(config)
    assert config.lanes[0].gpus == 2 and feed.gpus == 2
    one = find_hardware("h100")
    assert feed.hardware is not None and feed.hardware.peak_flops == 2 * one.peak_flops
    assert feed.hardware.name == f"2× {one.name}"


@pytest.mark.parametrize(
    ("flags", "said"),
    [
        ([*LANE, "--gpus", "0"], "<command line>: --gpus: "),
        (["--ledger", "x.db", "--gpus", "2"], "<command line>: --gpus: describes an ad-hoc lane"),
    ],
)
def test_a_gpus_mistake_names_its_flag(
    flags: list[str], said: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["report", *flags]) == 2
    assert said in capsys.readouterr().err
