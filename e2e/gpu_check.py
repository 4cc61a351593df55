"""What the cockpit reads through NVML against `nvidia-smi`, at the same moment.

Run by hand on a machine with an NVIDIA GPU and its driver (not in CI, which has neither):

    pip install -e '.[nvml]'          # the cockpit with nvidia-ml-py
    python e2e/gpu_check.py           # exit 0: every GPU agrees within the tolerances

Each GPU's utilisation, memory used and total, power and temperature as the cockpit's NVML
source reads them (`cockpit.sources.gpu_nvml`, the figures `cockpit report --nvml` shows) are
compared with `nvidia-smi --query-gpu=utilization.gpu,memory.used,memory.total,power.draw,
temperature.gpu --format=csv,noheader,nounits`, run straight after. Exit 1 and a line per
disagreement beyond the tolerances below; exit 2 if either side reads no GPU.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys

from cockpit.core.gpu import Gpu
from cockpit.sources.gpu_nvml import NvmlGpu

MIB = 2**20
QUERY = "utilization.gpu,memory.used,memory.total,power.draw,temperature.gpu"
TOLERANCES = {
    # reading: (absolute, relative) — the larger is allowed. Utilisation and power are
    # sampled by the driver over its own periods, so two reads a moment apart may differ.
    "util %": (10.0, 0.0),
    "memory used MiB": (64.0, 0.01),
    "memory total MiB": (1.0, 0.0),
    "power W": (15.0, 0.10),
    "temperature °C": (2.0, 0.0),
}


def cockpit_reads() -> tuple[list[Gpu], str]:
    async def read() -> tuple[list[Gpu], str]:
        source = NvmlGpu()
        try:
            totals = await source.read(60.0, None, {})
            return list(totals.gpus), totals.reason
        finally:
            await source.close()

    return asyncio.run(read())


def smi_reads() -> list[list[float]]:
    command = ["nvidia-smi", f"--query-gpu={QUERY}", "--format=csv,noheader,nounits"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=30, check=True)
    rows = [line.split(",") for line in done.stdout.strip().splitlines()]
    return [[float(cell) for cell in row] for row in rows]


def as_smi(gpu: Gpu) -> list[float | None]:
    """The cockpit's reading in nvidia-smi's units, in its query's order."""

    def mib(value: float | None) -> float | None:
        return None if value is None else value / MIB

    util = None if gpu.util is None else gpu.util * 100
    memory = [mib(gpu.memory_used_bytes), mib(gpu.memory_total_bytes)]
    return [util, *memory, gpu.power_w, gpu.temp_c]


def disagreements(ours: list[Gpu], theirs: list[list[float]]) -> list[str]:
    if len(ours) != len(theirs):
        return [f"the cockpit reads {len(ours)} GPUs, nvidia-smi {len(theirs)}"]
    found = []
    for gpu, row in zip(ours, theirs, strict=True):
        for (name, (absolute, relative)), mine, smi in zip(
            TOLERANCES.items(), as_smi(gpu), row, strict=True
        ):
            allowed = max(absolute, relative * abs(smi))
            if mine is None:
                found.append(f"GPU {gpu.id} {name}: the cockpit has none, nvidia-smi {smi:g}")
            elif abs(mine - smi) > allowed:
                found.append(
                    f"GPU {gpu.id} {name}: cockpit {mine:.1f}, nvidia-smi {smi:g} "
                    f"(allowed ±{allowed:g})"
                )
    return found


def main() -> int:
    ours, reason = cockpit_reads()
    if not ours:
        print(f"the cockpit reads no GPU through NVML: {reason}", file=sys.stderr)
        return 2
    try:
        theirs = smi_reads()
    except (OSError, subprocess.SubprocessError, ValueError) as error:
        print(f"nvidia-smi gave no reading: {error}", file=sys.stderr)
        return 2
    found = disagreements(ours, theirs)
    for line in found:
        print(line)
    if not found:
        print(f"{len(ours)} GPU(s): the cockpit's NVML reads agree with nvidia-smi")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
