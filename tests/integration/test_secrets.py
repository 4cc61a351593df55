"""Secrets never show: not on screen, in `cockpit report`, in receipts, logs or error lines.

A proxy in front of a real Prometheus demands the credentials (and quotes back whatever it
got in its 401, as careless servers do); every output the user can see is searched for them.
"""

from __future__ import annotations

import base64
import contextlib
import json
import logging
import ssl
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from cockpit.config.schema import Auth, Config, LaneConfig
from cockpit.widgets import CacheGauge
from tests.support.cli import cockpit_here, run_cockpit
from tests.support.fakeprom import serve_fake_prometheus
from tests.support.faultlane import (
    JOB,
    LANE_HIT_RATE,
    Exporter,
    error_notices,
    hit_rate_row,
    lane_reason,
    lane_state,
    notices,
    running_app,
    screen_text,
    shared_lane_prometheus,
    status_text,
    wait_until,
)
from tests.support.faultproxy import FaultProxy, http_answer, json_answer
from tests.support.promharness import PromServer
from tests.support.repo import require_binary
from tests.support.tls import TLS_REASON, AnswerAnything, self_signed, serving_tls

pytestmark = pytest.mark.prometheus

TOKEN = "tok-Zq8Xv3-SECRET-7731"
PASSWORD = "pw-Hs2k9-SECRET-0412"
SECRETS = (TOKEN, PASSWORD, base64.b64encode(f"ada:{PASSWORD}".encode()).decode())


def assert_clean(text: str, where: str) -> None:
    for secret in (*SECRETS, "SECRET"):
        assert secret not in text, f"a secret shows in {where}: {text[:2000]}"


@pytest.fixture(scope="module")
def prom(tmp_path_factory: pytest.TempPathFactory) -> PromServer:
    shared: tuple[Exporter, PromServer] = shared_lane_prometheus(
        tmp_path_factory.mktemp("prom-secrets")
    )
    return shared[1]


@pytest.fixture
def guarded(prom: PromServer) -> Iterator[FaultProxy]:
    with FaultProxy(prom.url, authorization=f"Bearer {TOKEN}") as proxy:
        yield proxy


def write_config(folder: Path, lane: dict[str, Any]) -> Path:
    lane = {"name": "guarded", "selector": f'job="{JOB}"', **lane}
    path = folder / "config.yaml"
    path.write_text(yaml.safe_dump({"lanes": [lane], "window": "5m"}, sort_keys=False))
    return path


def bearer_lane(url: str, variable: str = "LANE_TOKEN") -> Config:
    lane = LaneConfig(
        "guarded", prometheus=url, selector=f'job="{JOB}"', auth=Auth("bearer", secret_env=variable)
    )
    return Config(source="<test>", lanes=(lane,), window="5m", refresh_s=0.5)


async def test_screen_receipt_and_logs_never_show_the_token(
    guarded: FaultProxy,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    monkeypatch.setenv("LANE_TOKEN", TOKEN)
    async with running_app(bearer_lane(guarded.url), export_dir=tmp_path) as (app, pilot):
        await wait_until(
            pilot, lambda: lane_state(app) == "ok" and LANE_HIT_RATE in hit_rate_row(app)
        )
        assert guarded.seen and all(
            s.headers["authorization"] == f"Bearer {TOKEN}" for s in guarded.seen
        )
        await pilot.press("e")
        await wait_until(pilot, lambda: any(tmp_path.glob("cockpit-receipt-*.md")))
        receipt = next(tmp_path.glob("cockpit-receipt-*.md")).read_text()
        assert "guarded" in receipt
        assert_clean(receipt, "the exported receipt")
        assert_clean(screen_text(app), "the screen")
        assert any(text.startswith("receipt exported: ") for text in notices(app))
        assert_clean(repr(notices(app)), "notifications")

        guarded.authorization = "Bearer another"  # the server stops taking the token
        await pilot.press("r")
        await wait_until(pilot, lambda: lane_state(app) == "stale")
        assert "HTTP 401" in lane_reason(app) or "unauthorized" in lane_reason(app)
        for where, text in (
            ("the screen", screen_text(app)),
            ("the pane's tooltip", str(app.query_one(CacheGauge).tooltip)),
            ("the status line", status_text(app)),
            ("the reason", lane_reason(app)),
            ("notifications", repr(notices(app))),
        ):
            assert_clean(text, where)
        assert error_notices(app) == []
    assert_clean(caplog.text, "the logs")


def test_report_and_check_never_show_secrets(guarded: FaultProxy, tmp_path: Path) -> None:
    env = {"LANE_TOKEN": TOKEN}
    config = write_config(
        tmp_path, {"prometheus": guarded.url, "auth": {"bearer_env": "LANE_TOKEN"}}
    )
    for command in (("check",), ("report", "--format", "md"), ("report", "--format", "json")):
        done = run_cockpit(*command, "--config", str(config), env=env, cwd=tmp_path, home=tmp_path)
        assert done.returncode == 0, done.stderr
        assert_clean(done.stdout + done.stderr, " ".join(command))
    assert (
        LANE_HIT_RATE.rstrip("%")
        in run_cockpit(
            "report", "--config", str(config), env=env, cwd=tmp_path, home=tmp_path
        ).stdout
    )

    guarded.authorization = "Bearer something-else"  # a 401 that quotes the token back
    for command in (("check",), ("report", "--format", "md"), ("report", "--format", "json")):
        done = run_cockpit(*command, "--config", str(config), env=env, cwd=tmp_path, home=tmp_path)
        assert done.returncode == 1, done.stdout + done.stderr
        assert "unauthorized" in done.stdout + done.stderr
        assert "Traceback" not in done.stderr
        assert_clean(done.stdout + done.stderr, " ".join(command) + " after a 401")


def test_basic_auth_password_file_never_shows(guarded: FaultProxy, tmp_path: Path) -> None:
    secret_file = tmp_path / "password"
    secret_file.write_text(PASSWORD + "\n")
    guarded.authorization = "Basic " + base64.b64encode(f"ada:{PASSWORD}".encode()).decode()
    config = write_config(
        tmp_path,
        {"prometheus": guarded.url, "auth": {"username": "ada", "password_file": str(secret_file)}},
    )
    done = run_cockpit(
        "report", "--format", "json", "--config", str(config), env={}, cwd=tmp_path, home=tmp_path
    )
    assert done.returncode == 0, done.stderr
    assert_clean(done.stdout + done.stderr, "report with basic auth")
    guarded.authorization = "Basic bm9wZQ=="
    done = run_cockpit("check", "--config", str(config), env={}, cwd=tmp_path, home=tmp_path)
    assert done.returncode == 1 and "unauthorized" in done.stdout
    assert_clean(done.stdout + done.stderr, "check after a 401 with basic auth")


def test_a_tls_failure_with_a_token_says_nothing_of_it(tmp_path: Path) -> None:
    with serving_tls(tmp_path, AnswerAnything) as (url, _):
        config = write_config(tmp_path, {"prometheus": url, "auth": {"bearer_env": "LANE_TOKEN"}})
        done = run_cockpit(
            "check", "--config", str(config), env={"LANE_TOKEN": TOKEN}, cwd=tmp_path, home=tmp_path
        )
    assert done.returncode == 1 and done.stdout.rstrip().endswith(TLS_REASON)
    assert_clean(done.stdout + done.stderr, "check against a self-signed server")


@pytest.mark.parametrize(
    "url",
    [
        "ftp://ada:{secret}@127.0.0.1:9090",
        "http://ada:{secret}@127.0.0.1:9090",
        "http://ada:{secret}@127.0.0.1:99999999",
        "http://ada:{secret}@",
    ],
)
def test_credentials_in_a_url_are_refused_without_echoing_them(url: str, tmp_path: Path) -> None:
    url = url.format(secret=PASSWORD)
    config = write_config(tmp_path, {"prometheus": url})
    for args in (("check", "--config", str(config)), ("check", "--prometheus", url)):
        done = run_cockpit(*args, env={}, cwd=tmp_path, home=tmp_path)
        assert done.returncode == 2, done.stdout + done.stderr
        assert len(done.stderr.strip().splitlines()) == 1 and "Traceback" not in done.stderr
        assert_clean(done.stdout + done.stderr, f"the config error for {url!r}")


def echoed_answer(channel: str, secret: str) -> bytes:
    """A server answer that quotes the credential back through `channel`."""
    if channel == "reason":
        return f"HTTP/1.1 403 Forbidden {secret}\r\nContent-Length: 2\r\n\r\nno".encode()
    if channel == "error":
        return json_answer({"status": "error", "errorType": "auth", "error": f"got {secret}"}, 403)
    if channel == "warning":
        vector = {"resultType": "vector", "result": []}
        return json_answer({"status": "success", "data": vector, "warnings": [f"saw {secret}"]})
    return http_answer(200, f"<html>Sign in again, {secret}</html>")


AUTH_KINDS = {
    "bearer_env": ({"bearer_env": "LANE_SECRET"}, TOKEN, f"Bearer {TOKEN}"),
    "bearer_file": ({"bearer_file": "secret.txt"}, TOKEN, f"Bearer {TOKEN}"),
    "basic_env": ({"username": "ada", "password_env": "LANE_SECRET"}, PASSWORD, SECRETS[2]),
    "basic_file": ({"username": "ada", "password_file": "secret.txt"}, PASSWORD, SECRETS[2]),
}


@pytest.mark.slow
@pytest.mark.parametrize("kind", list(AUTH_KINDS))
@pytest.mark.parametrize("channel", ["reason", "error", "warning", "body"])
def test_a_server_quoting_the_credential_in_any_channel_never_gets_it_shown(
    prom: PromServer, tmp_path: Path, channel: str, kind: str
) -> None:
    """Every byte from a server passes the same masking: reason phrase, the API's error and
    warnings, the body; for every secret kind, in `check` and `report` (md and json), run
    through the CLI's main in this process (the tests above run the real command)."""
    auth, secret, wire = AUTH_KINDS[kind]
    (tmp_path / "secret.txt").write_text(secret + "\n")
    if "basic" in kind:
        wire = f"Basic {wire}"
    with FaultProxy(prom.url) as proxy:
        proxy.canned["/api/v1/query"] = echoed_answer(channel, wire)
        config = write_config(tmp_path, {"prometheus": proxy.url, "auth": auth})
        said = ""
        for command in (("check",), ("report", "--format", "md"), ("report", "--format", "json")):
            done = cockpit_here(*command, "--config", str(config), env={"LANE_SECRET": secret},
                            cwd=tmp_path, home=tmp_path)  # fmt: skip
            assert "Traceback" not in done.stderr
            assert_clean(done.stdout + done.stderr, f"{' '.join(command)} ({channel}, {kind})")
            said += done.stdout + done.stderr
        assert channel == "body" or "***" in said  # the server's words were shown, masked
        assert proxy.seen and all(s.headers["authorization"] == wire for s in proxy.seen)


@pytest.fixture(scope="module")
def tls(tmp_path_factory: pytest.TempPathFactory) -> tuple[ssl.SSLContext, Path]:
    """A self-signed certificate for 127.0.0.1 (openssl) and a server context holding it."""
    require_binary("openssl")
    cert, key = self_signed(tmp_path_factory.mktemp("tls"))
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    return context, cert


@contextlib.contextmanager
def quoting_server(
    channel: str, wire: str, context: ssl.SSLContext | None
) -> Iterator[tuple[str, list[str]]]:
    """A Prometheus (http, or https with `context`) that quotes `wire`, the credential it is
    sent, back through `channel`; and the Authorization headers it saw."""
    serving = serve_fake_prometheus(context)
    url, behaviour = next(serving)
    if channel == "reason":
        behaviour.status, behaviour.reason, behaviour.body = 403, f"Forbidden {wire}", b"no"
    elif channel == "error":
        error = {"status": "error", "errorType": "auth", "error": f"got {wire}"}
        behaviour.status, behaviour.body = 403, json.dumps(error).encode()
    elif channel == "warning":
        vector = {"resultType": "vector", "result": []}
        answer = {"status": "success", "data": vector, "warnings": [f"saw {wire}"]}
        behaviour.body = json.dumps(answer).encode()
    else:
        behaviour.body = f"<html>Sign in again, {wire}</html>".encode()
    try:
        yield url, behaviour.seen_auth
    finally:
        next(serving, None)


def secured_lane(url: str, kind: str, folder: Path, cert: Path | None) -> dict[str, Any]:
    auth, secret, _ = AUTH_KINDS[kind]
    auth = {name: str(folder / value) if name.endswith("_file") else value
            for name, value in auth.items()}  # fmt: skip
    (folder / "secret.txt").write_text(secret + "\n")
    lane: dict[str, Any] = {"name": "guarded", "prometheus": url, "auth": auth}
    return {**lane, "ca_file": str(cert)} if cert else lane


@pytest.mark.parametrize("scheme", ["http", "https"])
@pytest.mark.parametrize("kind", list(AUTH_KINDS))
@pytest.mark.parametrize("channel", ["reason", "error", "warning", "body"])
def test_every_secret_kind_over_http_and_https_stays_out_of_every_output(
    tls: tuple[ssl.SSLContext, Path],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    scheme: str,
    kind: str,
    channel: str,
) -> None:
    """In process through the real entry point: check, report md and json, stdout and
    stderr; the server quotes the very header it was sent."""
    from cockpit.cli.main import main

    context, cert = tls
    wire = AUTH_KINDS[kind][2] if "bearer" in kind else f"Basic {AUTH_KINDS[kind][2]}"
    monkeypatch.setenv("LANE_SECRET", AUTH_KINDS[kind][1])
    monkeypatch.setenv("HOME", str(tmp_path))
    with quoting_server(channel, wire, context if scheme == "https" else None) as (url, seen):
        lane = secured_lane(url, kind, tmp_path, cert if scheme == "https" else None)
        config = tmp_path / "config.yaml"
        config.write_text(yaml.safe_dump({"lanes": [lane], "window": "5m"}))
        said = ""
        for command in (("check",), ("report", "--format", "md"), ("report", "--format", "json")):
            code = main([*command, "--config", str(config)])
            out, err = capsys.readouterr()
            assert code in (0, 1), out + err
            assert_clean(out + err, f"{' '.join(command)} ({scheme}, {channel}, {kind})")
            said += out + err
        assert wire in seen  # the server got the credential, and quoted it back
    assert channel == "body" or "***" in said  # its words were shown, the secret masked


@pytest.mark.slow
@pytest.mark.parametrize("channel", ["reason", "error", "warning", "body"])
async def test_the_status_line_over_https_never_shows_the_secret(
    tls: tuple[ssl.SSLContext, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, channel: str
) -> None:
    """The poller's freshness reason and the warnings reach the status line, the panes and
    their tooltips: the secret in none of them."""
    context, cert = tls
    monkeypatch.setenv("LANE_TOKEN", TOKEN)
    with quoting_server(channel, f"Bearer {TOKEN}", context) as (url, seen):
        lane = LaneConfig("guarded", prometheus=url, auth=Auth("bearer", secret_env="LANE_TOKEN"),
                          ca_file=str(cert))  # fmt: skip
        config = Config(source="<test>", lanes=(lane,), window="5m", refresh_s=0.5)
        async with running_app(config) as (app, pilot):
            await wait_until(pilot, lambda: bool(lane_reason(app) or "saw" in status_text(app)))
            for where, text in (
                ("the status line", status_text(app)),
                ("the reason", lane_reason(app)),
                ("the screen", screen_text(app)),
                ("the pane's tooltip", str(app.query_one(CacheGauge).tooltip)),
                ("notifications", repr(notices(app))),
            ):
                assert_clean(text, f"{where} ({channel})")
        assert f"Bearer {TOKEN}" in seen
