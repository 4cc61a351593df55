"""Arbitrary YAML and arbitrary values into the config loader: it loads, or says one line.

In process through `parse_config`, and a few through the real `cockpit` binary, which runs in
a network namespace of its own so a fuzzed URL can't reach anything: the answer is exit 2
with `file:line: key: problem` on one line, or a loaded config; never a traceback.
"""

from __future__ import annotations

import os
import re
import subprocess
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cockpit.config.schema import Config, ConfigError, parse_config
from cockpit.roofline.profiles import hardware_profiles, model_profiles
from tests.support.cli import COCKPIT
from tests.support.strategies import documents

SOURCE = "fuzz.yaml"
HARDWARE = hardware_profiles()
MODELS = model_profiles()
FAST = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])

ONE_LINE = re.compile(r"^fuzz\.yaml(:\d+)?: ")
YAML_LINE_BREAK = re.compile("\r\n|[\r\n\x85\u2028\u2029]")


def load_or_one_line(text: str) -> Config | str:
    try:
        return parse_config(text, SOURCE, HARDWARE, MODELS)
    except ConfigError as error:
        message = str(error)
        assert "\n" not in message, message
        assert ONE_LINE.match(message), message
        if error.line is not None:
            breaks = len(YAML_LINE_BREAK.findall(text))  # YAML's: a lone \r is one too
            assert 1 <= error.line <= breaks + 2, (error.line, text)
        return message


@FAST
@given(st.text(max_size=200))
def test_any_text_loads_or_names_the_problem(text: str) -> None:
    load_or_one_line(text)


@FAST
@given(documents)
def test_any_values_under_known_keys_load_or_name_the_key(document: dict[str, Any]) -> None:
    text = yaml.safe_dump(document, allow_unicode=True, sort_keys=False)
    result = load_or_one_line(text)
    if isinstance(result, str) and re.match(r"^fuzz\.yaml:\d+: \w", result):
        key = result.split(": ")[1]
        top = re.split(r"[.\[]", key)[0]
        assert top in document or top == "", (key, document)


@FAST
@given(st.binary(max_size=120))
def test_any_bytes_as_text_load_or_name_the_problem(data: bytes) -> None:
    load_or_one_line(data.decode("utf-8", errors="replace"))


def _isolated() -> tuple[str, ...]:
    if subprocess.run(["unshare", "--net", "true"], capture_output=True).returncode != 0:
        pytest.skip("unshare --net is not permitted here: the fuzzed binary could reach out")
    return ("unshare", "--net")


@settings(max_examples=8, deadline=None, suppress_health_check=list(HealthCheck))
@given(document=documents)
def test_the_binary_exits_2_with_one_line_or_runs(tmp_path_factory: pytest.TempPathFactory,
                                                   document: dict[str, Any]) -> None:  # fmt: skip
    folder = tmp_path_factory.mktemp("fuzz")
    path = folder / "fuzz.yaml"
    path.write_text(yaml.safe_dump(document, allow_unicode=True, sort_keys=False))
    done = subprocess.run(
        [*_isolated(), COCKPIT, "check", "--config", str(path)],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=folder,
        env={**os.environ, "HOME": str(folder)},
    )
    assert "Traceback" not in done.stderr, done.stderr
    if done.returncode == 2:
        lines = done.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith(f"cockpit: {path}"), done.stderr
    else:
        assert done.returncode in (0, 1), (done.returncode, done.stderr)
        assert done.stdout.startswith(f"config: {path}: ok")
