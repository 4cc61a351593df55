"""Shared helpers for the benchmarks: spreads, /proc readings, a private tmux server, the demo.

Every process a benchmark starts runs with Python's bytecode cache on (a user's install has
`.pyc` files; `PYTHONDONTWRITEBYTECODE` in a CI shell would time the compiler instead).
"""

from __future__ import annotations

import contextlib
import os
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
RESULTS = HERE / "results"
VENV_BIN = Path(sys.executable).parent
COCKPIT = str(VENV_BIN / "cockpit")
PYTHON = sys.executable
TICKS = os.sysconf("SC_CLK_TCK")
PAGE = os.sysconf("SC_PAGE_SIZE")
PLACEHOLDERS = ("waiting for the first read", "reading…", "starting…", "reading the fleet…")
"""Text on screen while a pane, the status line or the overview has no data yet."""
OVERVIEW_SUBJECTS = ("cockpit on Prometheus, overview", "cockpit on /metrics, overview")
"""The cockpit on the demo's two lanes listed in a config: it opens on their overview."""
PANES_SUBJECTS = ("cockpit on Prometheus, lane panes", "cockpit on /metrics, lane panes")
"""The cockpit on a config listing one of them: it opens on the lane's panes."""
TARGETED = (*PANES_SUBJECTS, *OVERVIEW_SUBJECTS)
"""The subjects the start-up and idle targets hold for (`cockpit demo`, which also starts its
simulators, is shown for reference)."""


def spread(values: Sequence[float], digits: int = 4) -> dict[str, float]:
    """median / min / max (and the run count) of a list of figures."""
    return {
        "median": round(statistics.median(values), digits),
        "min": round(min(values), digits),
        "max": round(max(values), digits),
        "runs": len(values),
    }


def load_average() -> list[float]:
    return [round(value, 2) for value in os.getloadavg()]


def child_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment for measured processes: bytecode cache on, no colour quirks."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env.update(extra or {})
    return env


def warm_bytecode() -> None:
    """Import everything once so later runs load `.pyc` files, as an installed copy does."""
    subprocess.run(
        [
            PYTHON,
            "-c",
            "import cockpit.cli.main, cockpit.app.app, cockpit.demo, cockpit.runtime.feeds, "
            "bench._bare",
        ],
        env=child_env(),
        cwd=REPO,
        check=True,
    )


# --- /proc ------------------------------------------------------------------------------------


def cpu_seconds(pid: int) -> float:
    """utime + stime of the process (all its threads), in seconds."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


def rss_mb(pid: int) -> float:
    pages = int(Path(f"/proc/{pid}/statm").read_text().split()[1])
    return pages * PAGE / 1e6


def open_fds(pid: int) -> int:
    return sum(1 for _ in Path(f"/proc/{pid}/fd").iterdir())


def threads(pid: int) -> int:
    return sum(1 for _ in Path(f"/proc/{pid}/task").iterdir())


def children(pid: int) -> list[int]:
    """The process's child processes (`cockpit demo`'s: its simulators)."""
    return [
        int(child)
        for task in Path(f"/proc/{pid}/task").iterdir()
        for child in (task / "children").read_text().split()
    ]


def descendants(pid: int) -> list[int]:
    """The process's children, their children and so on; [] once it is gone."""
    try:
        direct = children(pid)
    except OSError:
        return []
    return [*direct, *(grandchild for child in direct for grandchild in descendants(child))]


def tree_cpu_seconds(pid: int) -> float:
    """utime + stime of the process and of every live descendant, plus the children's time
    they have reaped (cutime + cstime): a tool that runs helpers is charged for them."""
    total = 0.0
    for member in (pid, *descendants(pid)):
        try:
            fields = Path(f"/proc/{member}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:  # ended between the listing and the read: its parent reaps it
            continue
        total += sum(int(field) for field in fields[11:15]) / TICKS
    return total


def tree_rss_mb(pid: int) -> float:
    """RSS of the process and its live descendants."""
    total = 0.0
    for member in (pid, *descendants(pid)):
        with contextlib.suppress(OSError):
            total += rss_mb(member)
    return total


# --- tmux ---------------------------------------------------------------------------------------


class Tmux:
    """A private tmux server (its own socket, in a folder of its own), one session, windows of
    a fixed size; `close()` stops it and removes the socket."""

    def __init__(self, width: int = 160, height: int = 48) -> None:
        self._folder = Path(tempfile.mkdtemp(prefix="lc-bench-tmux-"))
        self.socket = str(self._folder / "socket")
        self.width, self.height = width, height
        self._windows = 0
        size = ("-x", str(width), "-y", str(height))
        self.tmux("new-session", "-d", "-s", "bench", *size, "sleep 86400")
        self.tmux("set-option", "-g", "default-size", f"{width}x{height}")
        self.tmux("set-option", "-g", "remain-on-exit", "on")

    def tmux(self, *args: str) -> str:
        done = subprocess.run(
            ["tmux", "-S", self.socket, *args],
            capture_output=True,
            text=True,
            env=child_env(),
            check=True,
        )
        return done.stdout

    def start(self, command: Sequence[str], env: Mapping[str, str] | None = None) -> Window:
        """Run `command` in a new window; its pane's process is the command itself (exec)."""
        self._windows += 1
        name = f"w{self._windows}"
        assignments = [f"{k}={v}" for k, v in (env or {}).items()]
        line = shlex.join(["env", "-u", "PYTHONDONTWRITEBYTECODE", *assignments, *command])
        self.tmux("new-window", "-d", "-t", "bench:", "-n", name, f"cd {REPO} && exec {line}")
        target = f"bench:{name}"
        self.tmux("resize-window", "-t", target, "-x", str(self.width), "-y", str(self.height))
        pid = int(self.tmux("display-message", "-p", "-t", target, "#{pane_pid}").strip())
        return Window(self, target, pid)

    def close(self) -> None:
        with contextlib.suppress(subprocess.CalledProcessError):
            self.tmux("kill-server")
        shutil.rmtree(self._folder, ignore_errors=True)


@dataclass
class Window:
    tmux: Tmux
    target: str
    pid: int

    def capture(self) -> str:
        return self.tmux.tmux("capture-pane", "-p", "-t", self.target)

    def keys(self, *keys: str) -> None:
        self.tmux.tmux("send-keys", "-t", self.target, *keys)

    def alive(self) -> bool:
        return Path(f"/proc/{self.pid}").exists() and "zombie" not in self._state()

    def _state(self) -> str:
        try:
            return Path(f"/proc/{self.pid}/status").read_text().split("\n")[2]
        except OSError:
            return "zombie"

    def stop(self, timeout: float = 5.0) -> None:
        """`q`, then the window goes; kill the process only if it did not quit."""
        with contextlib.suppress(subprocess.CalledProcessError):
            self.keys("q")
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and self.alive():
            time.sleep(0.05)
        if self.alive():
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, 9)
        with contextlib.suppress(subprocess.CalledProcessError):
            self.tmux.tmux("kill-window", "-t", self.target)


@contextlib.contextmanager
def tmux_server(width: int = 160, height: int = 48) -> Iterator[Tmux]:
    if shutil.which("tmux") is None:
        raise RuntimeError("tmux is not installed (apt-get install -y tmux)")
    server = Tmux(width, height)
    try:
        yield server
    finally:
        server.close()


# --- the first full frame, as tmux shows it ------------------------------------------------------

READY = "quit"
"""On the keys bar of the cockpit (lane panes and overview) and of the bare app. The bar fills
in a frame after the rest, so with no placeholder left the screen is fully drawn, with data."""


def full_frame(screen: str) -> bool:
    return READY in screen and not any(text in screen for text in PLACEHOLDERS)


def wait_full_frame(window: Window, timeout: float = 30.0) -> tuple[float, str]:
    """The epoch time tmux first showed `window` fully drawn (`full_frame`), and that screen;
    TimeoutError if it never did. What a user sees, read from outside the process."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        screen = window.capture()
        if full_frame(screen):
            return time.time(), screen
        time.sleep(0.01)
    raise TimeoutError(f"no full frame within {timeout:g} s:\n{window.capture()}")


# --- external sources: the demo's simulators in this process -----------------------------------


@contextlib.contextmanager
def demo_sources(with_prometheus: bool = False) -> Iterator[tuple[Any, Path]]:
    """The demo's lanes and Hermes writer (and Prometheus) here, and a config file for them."""
    from cockpit.demo import Demo, demo_config_yaml

    with Demo(with_prometheus=with_prometheus) as demo, tempfile.TemporaryDirectory() as tmp:
        if with_prometheus and demo.prometheus is None:
            raise RuntimeError(demo.prometheus_note)
        config = Path(tmp) / "config.yaml"
        config.write_text(demo_config_yaml(demo))
        yield demo, config


@contextlib.contextmanager
def compared_subjects() -> Iterator[tuple[Path, dict[str, list[str]]]]:
    """A temp folder and the commands the start-up and idle benchmarks compare, in this order:
    a bare Textual app, `cockpit demo`, and the cockpit on external sources (the demo's
    simulators in this process), through a real Prometheus and by direct scrape, on the
    overview of both lanes and on the panes of one."""
    with (
        tempfile.TemporaryDirectory() as tmp,
        demo_sources(with_prometheus=True) as (demo, prom_config),
        demo_sources(with_prometheus=False) as (_, scrape_config),
    ):
        wait_prometheus_rates(demo.prometheus_url, next(iter(demo.lanes)))
        yield (
            Path(tmp),
            {
                "bare Textual app": [PYTHON, "-m", "bench._bare"],
                "cockpit demo": [COCKPIT, "demo"],
                OVERVIEW_SUBJECTS[0]: [COCKPIT, "--config", str(prom_config)],
                OVERVIEW_SUBJECTS[1]: [COCKPIT, "--config", str(scrape_config)],
                PANES_SUBJECTS[0]: [COCKPIT, "--config", str(first_lane_only(prom_config))],
                PANES_SUBJECTS[1]: [COCKPIT, "--config", str(first_lane_only(scrape_config))],
            },
        )


def first_lane_only(config: Path) -> Path:
    """Beside `config`, the same config with its first lane only."""
    import yaml

    data = yaml.safe_load(config.read_text())
    one = config.with_name("one-lane.yaml")
    one.write_text(yaml.safe_dump({**data, "lanes": data["lanes"][:1]}, sort_keys=False))
    return one


def wait_prometheus_rates(url: str, job: str, timeout: float = 20.0) -> None:
    """Until Prometheus holds two scrapes of `job` (a rate needs two samples)."""
    import httpx

    deadline = time.monotonic() + timeout
    query = f'count_over_time(up{{job="{job}"}}[1m])'
    while time.monotonic() < deadline:
        with contextlib.suppress(httpx.HTTPError):
            body = httpx.get(f"{url}/api/v1/query", params={"query": query}).json()
            result = body.get("data", {}).get("result", [])
            if result and float(result[0]["value"][1]) >= 3:
                return
        time.sleep(0.2)
    raise TimeoutError(f"prometheus at {url} has no scrapes of {job}")


def table(rows: Sequence[Sequence[object]], header: Sequence[str]) -> str:
    """A plain text table, columns padded to their widest cell."""
    cells = [[str(c) for c in header], *[[str(c) for c in row] for row in rows]]
    widths = [max(len(row[i]) for row in cells) for i in range(len(header))]
    lines = ["  ".join(cell.ljust(widths[i]) for i, cell in enumerate(row)) for row in cells]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)
