"""Config: the example loads; every kind of mistake is one line naming file:line:key."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from cockpit.config.schema import ConfigError, parse_config
from cockpit.core.health import Thresholds
from cockpit.core.slo import NO_SLO, Slo
from cockpit.roofline.profiles import hardware_profiles, model_profiles
from tests.support.cli import COCKPIT
from tests.support.repo import REPO


def parse(text: str, source: str = "c.yaml"):  # type: ignore[no-untyped-def]
    return parse_config(text, source, hardware_profiles(), model_profiles())


def error_of(text: str) -> ConfigError:
    with pytest.raises(ConfigError) as caught:
        parse(text)
    return caught.value


def test_example_config_loads_every_option() -> None:
    path = REPO / "config.example.yaml"
    own_model = path.read_text().replace("model: llama-3.1-8b", "model: my-model")
    config = parse(own_model, str(path))
    assert [lane.name for lane in config.lanes] == ["dsv41", "bench-h100"]
    first, second = config.lanes
    assert first.prometheus == "http://127.0.0.1:9090" and first.selector == 'job="dsv41-lane"'
    assert first.hardware is not None and first.hardware.id == "gb300"
    assert first.auth is not None and first.auth.kind == "bearer"
    assert first.auth.secret_env == "PROM_TOKEN"
    assert first.slo == Slo(ttft_s=2.5, itl_s=0.1, e2e_s=60.0) and second.slo == NO_SLO
    assert second.metrics_url and second.hardware and second.hardware.id == "my-h100"
    assert second.model is not None and second.model.layers == 32
    assert config.prices.cache_write == 1.25
    assert config.ledger_window == "90d"
    assert len(config.ledgers) == 2 and config.ledgers[1].path == "work"


def test_empty_config_is_defaults() -> None:
    config = parse("")
    assert config.lanes == () and config.refresh_s == 5.0


@pytest.mark.parametrize(
    ("text", "line", "key", "words"),
    [
        ("refresh: 5\nwindw: 1h\n", 2, "windw", "did you mean 'window'"),
        ("refresh: fast\n", 1, "refresh", "expected a number"),
        ("refresh: -1\n", 1, "refresh", "positive"),
        ("refresh: 0\n", 1, "refresh", "positive"),
        ("lanes:\n  - name: a\n    prometheus: localhost:9090\n", 3, "lanes[0].prometheus", "URL"),
        ("lanes:\n  - name: a\n    prometheus: http://x\n    hardware: h900\n", 4,
         "lanes[0].hardware", "known: "),
        ("lanes:\n  - {name: a, metrics_url: 'http://x/m'}\n  - {name: a, metrics_url: 'http://y/m'}\n",
         3, "lanes[1].name", "duplicate lane name"),
        ("lanes: [\n", 2, "", "YAML syntax error"),
        ("lanes:\n  - name: a\n    selector: job=x\n    prometheus: http://x\n", 3,
         "lanes[0].selector", "label matchers"),
        ("lanes:\n  - name: a\n", 2, "lanes[0]", "exactly one of prometheus or metrics_url"),
        ("lanes:\n  - name: a\n    prometheus: http://u:p@x\n", 3, "lanes[0].prometheus",
         "credentials"),
        ("window: soon\n", 1, "window", "duration"),
        ("theme: [a]\n", 1, "theme", "single value"),
        ("theme: nope\n", 1, "theme", "expected one of cockpit-dark, cockpit-light"),
        ("refresh: 5\ntheme: cockpit-drak\n", 2, "theme", "did you mean 'cockpit-dark'"),
        ("prices:\n  output: -5\n", 2, "prices.output", "zero or more"),
        ("lanes:\n  - name: a\n    prometheus: http://x\n    engine: vlm\n", 4, "lanes[0].engine",
         "did you mean 'vllm'"),
        ("model_profiles:\n  m:\n    params: 8\n    bytes_per_param: 2\n    layers: -3\n", 5,
         "model_profiles.m.layers", ""),
        ("refresh: 1\nrefresh: 2\n", 2, "refresh", "given twice"),
        ("- a\n- b\n", 1, "", "mapping"),
        ("lanes:\n  - name: a\n    prometheus: http://x\n    auth: {bearer_env: T, username: u}\n",
         4, "lanes[0].auth", "either"),
        ("lanes:\n  - name: a\n    prometheus: http://x\n    slo:\n      ttft: 1\n", 5,
         "lanes[0].slo.ttft", "did you mean 'ttft_s'"),
        ("lanes:\n  - name: a\n    prometheus: http://x\n    slo:\n      itl_s: 0\n", 5,
         "lanes[0].slo.itl_s", "positive"),
        ("lanes:\n  - name: a\n    prometheus: http://x\n    slo: {e2e_s: soon}\n", 4,
         "lanes[0].slo.e2e_s", "expected a number"),
    ],
)  # fmt: skip
def test_each_mistake_names_line_and_key(text: str, line: int, key: str, words: str) -> None:
    error = error_of(text)
    assert error.line == line, str(error)
    assert error.key == key, str(error)
    assert words in str(error)
    assert str(error).startswith(f"c.yaml:{line}: ")
    assert "\n" not in str(error)


def test_a_wrong_choice_lists_the_choices_once() -> None:
    text = "lanes:\n  - name: a\n    prometheus: http://x\n    engine: tgi\n"
    with pytest.raises(ConfigError) as caught:
        parse_config(text, "c.yaml")
    assert str(caught.value).count("auto, vllm, vllm-legacy, sglang") == 1
    assert "'tgi'" in str(caught.value)


def test_e_notation_without_sign_is_a_number() -> None:
    config = parse(
        "hardware_profiles:\n  g:\n    peak_flops: 1e15\n    bandwidth: 2e12\n"
        "    memory_bytes: 8e10\n"
        "lanes:\n  - {name: a, metrics_url: 'http://x/m', hardware: g}\n"
    )
    hardware = config.lanes[0].hardware
    assert hardware is not None and hardware.ridge == 500.0


@pytest.mark.parametrize("separator", ["\\x1c", "\\x1f"])
def test_a_number_with_a_separator_byte_is_refused_by_name(separator: str) -> None:
    # str.strip() drops these bytes but float() refuses them: still a config error, no traceback.
    error = error_of(f'refresh: "{separator}1e5"\n')
    assert "refresh" in str(error) and "expected" in str(error)


def test_profile_ids_are_case_insensitive() -> None:
    config = parse(
        "lanes:\n  - {name: a, metrics_url: 'http://x/m', hardware: H100, model: LLAMA-3.1-8B}\n"
    )
    assert config.lanes[0].hardware is not None and config.lanes[0].model is not None


def test_window_outside_the_list_joins_it() -> None:
    config = parse("window: 2h\nwindows: [1h, 5m]\n")
    assert config.windows == ("5m", "1h", "2h")


def test_example_shows_every_option() -> None:
    """Every option the loader accepts appears in config.example.yaml (set or commented)."""
    from cockpit.config import schema as module

    text = (REPO / "config.example.yaml").read_text()
    options = [
        *module._TOP_KEYS,
        *module._LANE_KEYS,
        *module._GPU_KEYS,
        *module._SLO_KEYS,
        "bearer_env",
        "bearer_file",
        "username",
        "password_env",
        "password_file",
        "cache_read",
        "cache_write",
        "active_params",
    ]
    absent = [option for option in options if f"{option}:" not in text]
    assert absent == []


def test_health_thresholds_default_and_read() -> None:
    assert parse("").health == Thresholds()
    assert Thresholds().kv_usage == 0.9 and Thresholds().ttft_p99_slo is None
    config = parse(
        "health:\n  queue_refreshes: 5\n  kv_usage: 0.95\n  hit_rate: 0\n"
        "  failed_share: 0.05\n  ttft_p99_slo: 1.5\n"
    )
    assert config.health == Thresholds(5, 0.95, 0.0, 0.05, 1.5)
    assert parse("health:\n  ttft_p99_slo: null\n").health.ttft_p99_slo is None
    example = parse((REPO / "config.example.yaml").read_text())
    assert example.health == Thresholds(3, 0.9, 0.7, 0.01, 2.5)


def test_export_dir_and_ledger_models_are_read() -> None:
    assert parse("").export_dir is None
    assert parse("export_dir: ~/receipts\n").export_dir == "~/receipts"
    config = parse(
        "lanes:\n  - name: a\n    metrics_url: http://x/m\n"
        "    ledger_models: [custom/llama, llama, custom/llama]\n"
    )
    assert config.lanes[0].ledger_models == ("custom/llama", "llama")
    assert parse("lanes:\n  - {name: a, metrics_url: 'http://x/m'}\n").lanes[0].ledger_models == ()


@pytest.mark.parametrize(
    ("text", "line", "key", "words"),
    [
        ("health:\n  kv_usage: 90\n", 2, "health.kv_usage", "up to 1"),
        ("health:\n  kv_usage: 0\n", 2, "health.kv_usage", "positive"),
        ("health:\n  hit_rate: -0.1\n", 2, "health.hit_rate", "zero or more"),
        ("health:\n  failed_share: lots\n", 2, "health.failed_share", "expected a number"),
        ("health:\n  queue_refreshes: 2.5\n", 2, "health.queue_refreshes", "whole number"),
        ("health:\n  queue_refreshes: 0\n", 2, "health.queue_refreshes", "whole number"),
        ("health:\n  ttft_p99_slo: soon\n", 2, "health.ttft_p99_slo", "expected a number"),
        ("refresh: 5\nhealth:\n  kv_use: 0.8\n", 3, "health.kv_use", "did you mean 'kv_usage'"),
        ("health: 0.9\n", 1, "health", "expected a mapping"),
        ("export_dir: [a]\n", 1, "export_dir", "single value"),
        ("export_dir: ''\n", 1, "export_dir", "expected text"),
        ("lanes:\n  - name: a\n    metrics_url: http://x/m\n    ledger_models: llama\n", 4,
         "lanes[0].ledger_models", "expected a list"),
        ("lanes:\n  - name: a\n    metrics_url: http://x/m\n    ledger_models:\n      - llama\n"
         "      - 3\n", 6, "lanes[0].ledger_models[1]", "expected text"),
    ],
)  # fmt: skip
def test_each_new_key_mistake_names_line_and_key(
    text: str, line: int, key: str, words: str
) -> None:
    test_each_mistake_names_line_and_key(text, line, key, words)


def test_a_bad_threshold_exits_2_naming_file_line_and_key(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    path.write_text("refresh: 5\nhealth:\n  hit_rate: 70%\n")
    done = subprocess.run(
        [COCKPIT, "check", "--config", str(path)],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "HOME": str(tmp_path)},
    )
    assert done.returncode == 2
    assert done.stderr.strip() == (
        f"cockpit: {path}:3: health.hit_rate: expected a number, got '70%'"
    )
