"""Which processes use the host's CPUs while `profile-model` runs beside a farm (issue 19's noisy A/B).

Every ``--every`` seconds, one JSON line: the time, the load average, the processes that used more than
``--min-percent`` of one CPU since the last sample (pid, percent, command) and, where NVML answers, the GPU's
SM clock and its active clock-throttle reasons. Runs until killed (or ``--seconds``).

    python3 benchmarks/profiler/host_sampler.py --out FILE &
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path
from typing import Any


def cpu_ticks() -> dict[int, tuple[int, str]]:
    out = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
            command = Path(f"/proc/{entry}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        out[int(entry)] = (int(fields[11]) + int(fields[12]), command[:160])
    return out


def gpu_reader() -> Any:
    try:
        import pynvml

        pynvml.nvmlInit()
        handle = pynvml.nvmlDeviceGetHandleByIndex(0)
    except Exception:
        return lambda: {}

    def read() -> dict[str, Any]:
        return {"sm_mhz": pynvml.nvmlDeviceGetClockInfo(handle, pynvml.NVML_CLOCK_SM),
                "throttle_reasons": pynvml.nvmlDeviceGetCurrentClocksEventReasons(handle),
                "utilization": pynvml.nvmlDeviceGetUtilizationRates(handle).gpu}  # fmt: skip

    return read


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--every", type=float, default=1.0)
    parser.add_argument("--min-percent", type=float, default=5.0)
    parser.add_argument("--seconds", type=float, default=3600.0)
    args = parser.parse_args()
    hz = os.sysconf("SC_CLK_TCK")
    gpu = gpu_reader()
    before, then = cpu_ticks(), time.monotonic()
    end = then + args.seconds
    with args.out.open("a") as out:
        while time.monotonic() < end:
            time.sleep(args.every)
            now_ticks, now = cpu_ticks(), time.monotonic()
            span = now - then
            busy = [
                {"pid": pid, "percent": round((ticks - before[pid][0]) / hz / span * 100, 1), "command": command}
                for pid, (ticks, command) in now_ticks.items()
                if pid in before and (ticks - before[pid][0]) / hz / span * 100 >= args.min_percent
            ]
            busy.sort(key=lambda row: -row["percent"])
            row = {"time": time.time(), "load": os.getloadavg()[0], "busy": busy, **gpu()}
            out.write(json.dumps(row) + "\n")
            out.flush()
            before, then = now_ticks, now


if __name__ == "__main__":
    main()
