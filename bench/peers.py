"""Side by side with its peers: the cockpit, vllmstat and vllm-htop on the same simulated vLLM.

`python -m bench peers [--quick]` (or `python -m bench.peers`). It installs the two peers
into a venv of their own, `bench/results/peers-venv` (pip, from PyPI; never a dependency of
the project), and serves the demo's simulated engine (`cockpit.demo.lane`, preset
`gb300-dsv4`, the same seed; HTTP/1.1 with kept-alive connections, as vLLM's uvicorn) on
loopback twice: with `_created` series, as a real vLLM (prometheus_client) writes them, and
without (`PROMETHEUS_DISABLE_CREATED_SERIES`). Neither
serves `process_start_time_seconds`. At each interval (1, 2 and 5 s) every tool watches each
of the two engines, each in its own 160×48 tmux pane, beside a bare Textual app (Header, one
Static, Footer: `python -m bench._bare`), the floor.

How each is run (HOME is an empty folder, so no one's config is read):

- **vllmstat 0.9.1** (Textual, httpx, prometheus_client; console script `vllmstat.cli:main`):
  `vllmstat --url http://127.0.0.1:PORT --interval S --no-gpu`. `--url` is the server's base
  URL; it reads `--metrics-path` (default `/metrics`) and asks `/v1/models` once (the demo
  answers 404; it carries on). `-i/--interval` is in seconds (default 1); `--no-gpu` skips
  NVML (there is no GPU here). Its rates are an EWMA over consecutive scrapes: the first poll
  shows `gen 0 tok/s`, a rate comes with the second, when the plot's caption reads
  `gen tok/s · last 2s`.
- **vllm-htop 0.5.0** (one file, standard library only, ANSI text on the alternate screen;
  console script `vllm_htop:main`): `vllm-htop --url http://127.0.0.1:PORT --interval S
  --no-gpu-detect`. It appends `/metrics` to the base URL; `--interval` snaps to its cycle
  (0.5, 1, 2, 5, 10, 30 s; default 2); `--no-gpu-detect` skips `nvidia-smi`. Between polls it
  waits on the keyboard for at most 0.2 s at a time. Its first screen says "collecting first
  sample…"; `Output tokens/s : N` comes with the second poll.
- **the cockpit**: `cockpit --metrics-url http://127.0.0.1:PORT/metrics --refresh S
  --hardware gb300 --model deepseek-v3 --gpus 4` (a direct scrape, the lane's roofline
  profile as the demo's config gives it).

Method. The panes start one after another (the order turned by one each round). For each
the time is taken just before tmux starts it, and its screen is read with `capture-pane`
every 50 ms until it shows the engine's figures (first data: vllmstat `● connected`,
vllm-htop `Running : N`, the cockpit `running N │`) and a rate (first rates: the texts above;
the cockpit `gen N tok/s` in its vital strip; the bare app its text). Once all are up: a
10 s warm-up, then the CPU of each process tree (utime + stime of the process, its live
descendants and the children it reaped, from /proc) over the same 30 s idle for all, as % of
one core, and RSS (the tree's) at its end. Two rounds; each figure is shown as the min–max of
the rounds, a ratio as the min–max of the ratios within a round. `--quick`: one round at
1 s, 3 s warm-up, 5 s measured, to check the bench itself.

Targets: idle CPU of the cockpit at 1 and 2 s ≤ 0.5× vllmstat's in the same round; its first
rates no later than vllmstat's first data; RSS ≤ 60 MB. Judged on the engine with `_created`, as
a real vLLM has. The two other rows of the cost targets need a Prometheus and have no peer to
stand beside, so other benchmarks measure them (`OTHER_ROWS`, printed with the tables): a
Prometheus lane with a live ledger at 5 s ≤ 0.6 % (`bench idle`, its row `cockpit on
Prometheus, lane panes`) and the overview of 100 lanes at 5 s ≤ 1.0 % (`bench fleet`, its row
`idle CPU, overview open`).
"""

from __future__ import annotations

import contextlib
import json
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bench.common import (
    COCKPIT,
    PYTHON,
    RESULTS,
    Tmux,
    Window,
    load_average,
    table,
    tmux_server,
    tree_cpu_seconds,
    tree_rss_mb,
    warm_bytecode,
)

if TYPE_CHECKING:
    from cockpit.demo.lane import SimulatedLane

PEERS = ("vllmstat==0.9.1", "vllm-htop==0.5.0")
VENV = RESULTS / "peers-venv"
PRESET = "gb300-dsv4"
VARIANTS = {"with _created": True, "without _created": False}
JUDGED = "with _created"
"""The engine the targets are judged on: a real vLLM writes `_created` series."""
CPU_RATIO_TARGET = 0.5
CPU_RATIO_INTERVALS = (1.0, 2.0)
RSS_TARGET_MB = 60.0
POLL_S = 0.05
OTHER_ROWS = (
    "idle CPU, Prometheus lane + live ledger, 5 s ≤ 0.6 %: `python -m bench idle`, "
    "row `cockpit on Prometheus, lane panes`",
    "idle CPU, the overview of 100 lanes, 5 s ≤ 1.0 %: `python -m bench fleet`, "
    "row `idle CPU, overview open`",
)
"""The cost targets this benchmark leaves to others, and where they are measured."""


@dataclass(frozen=True, slots=True)
class Plan:
    intervals: tuple[float, ...]
    warmup_s: float
    measure_s: float
    rounds: int


FULL = Plan(intervals=(1.0, 2.0, 5.0), warmup_s=10.0, measure_s=30.0, rounds=2)
QUICK = Plan(intervals=(1.0,), warmup_s=3.0, measure_s=5.0, rounds=1)


@dataclass(frozen=True, slots=True)
class Tool:
    """How to start one tool on an engine, and what its screen shows once it has data and rates."""

    name: str
    argv: Callable[[Path, str, float], list[str]]
    """(the peers' bin folder, the engine's /metrics URL, the interval) -> the command."""
    data: re.Pattern[str]
    rates: re.Pattern[str]


def _base(url: str) -> str:
    return url.removesuffix("/metrics")


COCKPIT_TOOL = Tool(
    "lane-cockpit",
    lambda _, url, s: [COCKPIT, "--metrics-url", url, "--refresh", f"{s:g}",
                       "--hardware", "gb300", "--model", "deepseek-v3", "--gpus", "4"],
    re.compile(r"\brunning \d+ │"),
    re.compile(r"│ gen \d[\d,.]*(?: [kMG])? tok/s"),
)  # fmt: skip
VLLMSTAT = Tool(
    "vllmstat",
    lambda bin_, url, s: [str(bin_ / "vllmstat"), "--url", _base(url), "--interval", f"{s:g}",
                          "--no-gpu"],
    re.compile(r"● connected"),
    re.compile(r"gen tok/s · last (?:[2-9]|\d\d+)s"),
)  # fmt: skip
VLLM_HTOP = Tool(
    "vllm-htop",
    lambda bin_, url, s: [str(bin_ / "vllm-htop"), "--url", _base(url), "--interval", f"{s:g}",
                          "--no-gpu-detect"],
    re.compile(r"Running\s+:\s+\d"),
    re.compile(r"Output tokens/s\s+:\s+\d"),
)  # fmt: skip
BARE = Tool(
    "bare Textual app",
    lambda *_: [PYTHON, "-m", "bench._bare"],
    re.compile(r"bare Textual app: ready"),
    re.compile(r"bare Textual app: ready"),
)
TOOLS = (COCKPIT_TOOL, VLLMSTAT, VLLM_HTOP)


@dataclass(frozen=True, slots=True)
class Subject:
    tool: Tool
    variant: str
    """A key of VARIANTS; "" for the bare app, which reads nothing."""

    @property
    def key(self) -> str:
        return f"{self.tool.name} [{self.variant}]" if self.variant else self.tool.name


def subjects() -> list[Subject]:
    return [Subject(BARE, ""), *(Subject(t, v) for v in VARIANTS for t in TOOLS)]


# --- the peers' venv ------------------------------------------------------------------------


class PeersUnavailable(RuntimeError):
    """The peers could not be installed; the message is one line."""


def install_peers(venv: Path) -> Path:
    """The peers installed in `venv` (once: a stamp names what is there); its bin folder."""
    stamp = venv / ".installed"
    wanted = "\n".join(PEERS)
    if stamp.exists() and stamp.read_text() == wanted:
        return venv / "bin"
    made = subprocess.run([PYTHON, "-m", "venv", str(venv)], capture_output=True, text=True)
    if made.returncode:
        raise PeersUnavailable(f"cannot create a venv in {venv}: {last_error(made.stderr)}")
    pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet"]
    flags = ["--disable-pip-version-check", "--timeout", "15", "--retries", "1"]
    done = subprocess.run([*pip, *flags, *PEERS], capture_output=True, text=True)
    if done.returncode:
        raise PeersUnavailable(
            f"cannot install {' and '.join(PEERS)} into {venv} (is PyPI reachable?): "
            f"{last_error(done.stderr or done.stdout)}"
        )
    for module in ("vllmstat.app", "vllm_htop"):  # the first run would otherwise pay the import
        subprocess.run([str(venv / "bin" / "python"), "-c", f"import {module}"], check=False)
    stamp.write_text(wanted)
    return venv / "bin"


def last_error(output: str) -> str:
    """pip's last `ERROR:` line (or its last line), without the prefix."""
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    errors = [line for line in lines if line.startswith("ERROR:")]
    last = (errors or lines or ["no output"])[-1]
    return last.removeprefix("ERROR:").strip()


def installed_versions(bin_folder: Path) -> dict[str, str]:
    names = [peer.split("==")[0] for peer in PEERS]
    script = "import importlib.metadata as m, sys; print(*(m.version(n) for n in sys.argv[1:]))"
    out = subprocess.run(
        [str(bin_folder / "python"), "-c", script, *names],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    return dict(zip(names, out, strict=True))


# --- the engines ----------------------------------------------------------------------------


@contextlib.contextmanager
def engines() -> Iterator[dict[str, SimulatedLane]]:
    """Each variant's simulated engine, serving on loopback."""
    from cockpit.demo.lane import SimulatedLane

    with contextlib.ExitStack() as stack:
        yield {
            variant: stack.enter_context(SimulatedLane(PRESET, seed=0, created_series=created))
            for variant, created in VARIANTS.items()
        }


def exposition_bytes(lanes: dict[str, SimulatedLane]) -> dict[str, int]:
    return {variant: len(lane.render().encode()) for variant, lane in lanes.items()}


# --- one interval, one round ----------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Started:
    first_data_s: float | None
    first_rates_s: float | None


def wait_for_screen(
    tmux: Tmux, argv: Sequence[str], tool: Tool, env: dict[str, str], timeout: float
) -> tuple[Window, Started]:
    """Start `argv` in a pane; seconds from just before the start to its first data and first
    rates on screen (None: not within `timeout`)."""
    started = time.monotonic()
    window = tmux.start(argv, env)
    data = rates = None
    while time.monotonic() - started < timeout:
        screen = window.capture()
        now = time.monotonic() - started
        if data is None and tool.data.search(screen):
            data = now
        if tool.rates.search(screen):
            rates = now
            data = now if data is None else data
            break
        if not window.alive():
            window.stop()
            last = next((line for line in reversed(screen.splitlines()) if line.strip()), "")
            raise RuntimeError(f"{tool.name} exited: {last.strip() or 'no output'}")
        time.sleep(POLL_S)
    return window, Started(data, rates)


def one_interval(
    tmux: Tmux,
    lanes: dict[str, SimulatedLane],
    bin_folder: Path,
    interval: float,
    plan: Plan,
    turn: int,
    home: Path,
) -> dict[str, dict[str, float | None]]:
    """Every subject at `interval`: time to first data and rates, idle CPU %, RSS."""
    env = {"HOME": str(home), "XDG_CONFIG_HOME": str(home / ".config")}
    order = subjects()
    order = order[turn % len(order) :] + order[: turn % len(order)]
    windows: dict[str, Window] = {}
    firsts: dict[str, Started] = {}
    try:
        for subject in order:
            url = lanes[subject.variant].url if subject.variant else ""
            argv = subject.tool.argv(bin_folder, url, interval)
            window, first = wait_for_screen(tmux, argv, subject.tool, env, 20 + 3 * interval)
            windows[subject.key], firsts[subject.key] = window, first
        time.sleep(plan.warmup_s)
        before = {key: tree_cpu_seconds(w.pid) for key, w in windows.items()}
        began = time.monotonic()
        time.sleep(plan.measure_s)
        elapsed = time.monotonic() - began
        after = {key: tree_cpu_seconds(w.pid) for key, w in windows.items()}
        rss = {key: tree_rss_mb(w.pid) for key, w in windows.items()}
    finally:
        for window in windows.values():
            window.stop()
    return {
        subject.key: {
            "cpu_pct": 100 * (after[subject.key] - before[subject.key]) / elapsed,
            "rss_mb": rss[subject.key],
            "first_data_s": firsts[subject.key].first_data_s,
            "first_rates_s": firsts[subject.key].first_rates_s,
        }
        for subject in subjects()
    }


# --- the run --------------------------------------------------------------------------------


def run(quick: bool = False) -> dict[str, Any]:
    plan = QUICK if quick else FULL
    try:
        bin_folder = install_peers(VENV)
    except PeersUnavailable as error:
        print(f"bench peers: {error}", file=sys.stderr)
        raise SystemExit(1) from None
    warm_bytecode()
    result: dict[str, Any] = {
        "plan": {"intervals_s": plan.intervals, "warmup_s": plan.warmup_s,
                 "measure_s": plan.measure_s, "rounds": plan.rounds, "quick": quick},
        "peers": installed_versions(bin_folder),
        "load_average_before": load_average(),
        "rounds": [],
    }  # fmt: skip
    with (
        engines() as lanes,
        tmux_server() as tmux,
        tempfile.TemporaryDirectory(prefix="lc-bench-home-") as home,
    ):
        result["exposition_bytes"] = exposition_bytes(lanes)
        for turn in range(plan.rounds):
            readings = {
                f"{interval:g}": one_interval(
                    tmux, lanes, bin_folder, interval, plan, turn, Path(home)
                )
                for interval in plan.intervals
            }
            result["rounds"].append({"load_average": load_average(), "intervals": readings})
    result["load_average_after"] = load_average()
    result["targets"] = judge(result)
    result["ok"] = all(target["met"] for target in result["targets"].values())
    print_tables(result)
    return result


def per_round(result: dict[str, Any], interval: str, key: str, figure: str) -> list[float | None]:
    return [r["intervals"][interval][key][figure] for r in result["rounds"]]


def ratios(
    result: dict[str, Any], interval: str, variant: str, figure: str, versus: str = ""
) -> list[float | None]:
    """The cockpit's `figure` over vllmstat's (its `versus`, if given) within each round."""
    ours = per_round(result, interval, Subject(COCKPIT_TOOL, variant).key, figure)
    theirs = per_round(result, interval, Subject(VLLMSTAT, variant).key, versus or figure)
    return [a / b if a is not None and b else None for a, b in zip(ours, theirs, strict=True)]


def judge(result: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Each target: the values it is judged on (every round) and whether all meet it."""
    targets: dict[str, dict[str, Any]] = {}
    intervals = list(result["rounds"][0]["intervals"])
    for interval in intervals:
        if float(interval) in CPU_RATIO_INTERVALS:
            values = ratios(result, interval, JUDGED, "cpu_pct")
            targets[f"idle CPU at {interval} s ≤ {CPU_RATIO_TARGET}× vllmstat"] = {
                "values": values,
                "met": all(v is not None and v <= CPU_RATIO_TARGET for v in values),
            }
        ours = per_round(result, interval, Subject(COCKPIT_TOOL, JUDGED).key, "first_rates_s")
        theirs = per_round(result, interval, Subject(VLLMSTAT, JUDGED).key, "first_data_s")
        targets[f"first rates at {interval} s ≤ vllmstat's first data"] = {
            "values": ours,
            "vllmstat_first_data_s": theirs,
            "met": all(
                a is not None and b is not None and a <= b
                for a, b in zip(ours, theirs, strict=True)
            ),
        }
    rss = [
        r["intervals"][i][Subject(COCKPIT_TOOL, v).key]["rss_mb"]
        for r in result["rounds"]
        for i in intervals
        for v in VARIANTS
    ]
    targets[f"RSS ≤ {RSS_TARGET_MB:g} MB"] = {"values": rss, "met": max(rss) <= RSS_TARGET_MB}
    return targets


# --- printing -------------------------------------------------------------------------------


def span(values: Sequence[float | None], digits: int, unit: str = "") -> str:
    """min–max of the values ("never" for a round that didn't get there)."""
    known = [v for v in values if v is not None]
    if not known:
        return "never"
    low, high = f"{min(known):.{digits}f}", f"{max(known):.{digits}f}"
    text = low if low == high else f"{low}–{high}"
    missing = len(values) - len(known)
    return f"{text}{unit}" + (f" ({missing} never)" if missing else "")


def print_tables(result: dict[str, Any]) -> None:
    intervals = list(result["rounds"][0]["intervals"])
    cpu_rows, first_rows = [], []
    for interval in intervals:
        for variant in VARIANTS:
            cpu_rows.append(cpu_row(result, interval, variant))
            first_rows.append(first_rates_row(result, interval, variant))
    print(table(cpu_rows, ("interval", "engine", "lane-cockpit CPU %", "vllmstat", "vllm-htop",
                           "bare app", "cockpit ÷ vllmstat")))  # fmt: skip
    print()
    print(table(first_rows, ("interval", "engine", "lane-cockpit first rates s",
                             "vllmstat data / rates", "vllm-htop data / rates",
                             "bare app screen", "cockpit ÷ vllmstat data")))  # fmt: skip
    print()
    rss_rows = []
    for subject in subjects():
        values = [
            r["intervals"][i][subject.key]["rss_mb"] for r in result["rounds"] for i in intervals
        ]
        rss_rows.append((subject.key, span(values, 1)))
    print(table(rss_rows, ("subject", "RSS MB")))
    plan = result["plan"]
    print(
        f"\n{plan['rounds']} round(s), {plan['warmup_s']:g} s warm-up, {plan['measure_s']:g} s "
        f"measured, 160×48; /metrics bytes {result['exposition_bytes']}; load average before "
        f"{result['load_average_before']}, after {result['load_average_after']}"
    )
    for name, target in result["targets"].items():
        print(f"{'met   ' if target['met'] else 'MISSED'}  {name}: {target_values(target)}")
    print("all targets met" if result["ok"] else "TARGET MISSED")
    for row in OTHER_ROWS:
        print(f"not measured here: {row}")


def cpu_row(result: dict[str, Any], interval: str, variant: str) -> tuple[str, ...]:
    tools = [per_round(result, interval, Subject(t, variant).key, "cpu_pct") for t in TOOLS]
    bare = per_round(result, interval, BARE.name, "cpu_pct")
    ratio = ratios(result, interval, variant, "cpu_pct")
    return (
        f"{interval} s",
        variant,
        *(span(v, 2) for v in tools),
        span(bare, 2),
        span(ratio, 2, "×"),
    )


def first_rates_row(result: dict[str, Any], interval: str, variant: str) -> tuple[str, ...]:
    def both(tool: Tool) -> str:
        key = Subject(tool, variant).key
        data = per_round(result, interval, key, "first_data_s")
        return f"{span(data, 2)} / {span(per_round(result, interval, key, 'first_rates_s'), 2)}"

    ours = per_round(result, interval, Subject(COCKPIT_TOOL, variant).key, "first_rates_s")
    bare = per_round(result, interval, BARE.name, "first_rates_s")
    ratio = ratios(result, interval, variant, "first_rates_s", "first_data_s")
    return (f"{interval} s", variant, span(ours, 2), both(VLLMSTAT), both(VLLM_HTOP),
            span(bare, 2), span(ratio, 2, "×"))  # fmt: skip


def target_values(target: dict[str, Any]) -> str:
    values = [f"{v:.2f}" if v is not None else "never" for v in target["values"]]
    text = ", ".join(values)
    if "vllmstat_first_data_s" in target:
        theirs = [f"{v:.2f}" if v is not None else "never" for v in target["vllmstat_first_data_s"]]
        text += f" s against {', '.join(theirs)} s"
    return text


if __name__ == "__main__":
    print(json.dumps(run(quick="--quick" in sys.argv[1:]), indent=2, default=str))
