"""Does an energy reading repeat? The first meter against the current one, on the same configs.

For each kernel, takes the configs that both of the earlier energy-farm jobs measured (from that
run's report), and measures each in ``--passes`` passes (a pass goes over every config, so two
readings of one config are as far apart as the configs make them, like two jobs): per config and
pass, the farm's timing (CUDA events, L2 flushed), then the first meter's reading (kept here
verbatim as ``first_meter``: batches of 16 launches with a host wait after each, 0.25 s) and the
current meter's (kernelfarm.worker.measuring.energy). Reports per meter the relative difference
between passes (|a - b| / mean) per config, their median and max. Also measures the energy
counter's update period, idle and busy, by polling it.

Run on the GPU machine from the repository root, kernelfarm and its dependencies importable:
    python3 benchmarks/gpu/energy_repeat.py --farm-report benchmarks/gpu/results-h100-2026-11-24-energy-farm.json \
        --configs 6 --passes 2 --out DIR
"""

from __future__ import annotations

import argparse
import itertools
import json
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kernelfarm.kernels.registry import get_kernel
from kernelfarm.worker.cuda.compiler import CompileJob, compile_job
from kernelfarm.worker.cuda.device import arch_for
from kernelfarm.worker.cuda.implementation import cuda_impl
from kernelfarm.worker.cuda.loader import CubinLoader
from kernelfarm.worker.measuring.energy import EnergyMeter
from kernelfarm.worker.measuring.session import Session
from kernelfarm.worker.measuring.timing import time_kernel


def first_meter(nvml: Any, handle: Any, launch: Callable[[], Any], synchronize: Callable[[], Any]) -> dict[str, Any]:
    """The meter as the first H100 run used it (worker/measuring/energy.py at 9530c83)."""
    synchronize()
    first = int(nvml.nvmlDeviceGetTotalEnergyConsumption(handle))
    start = time.perf_counter()
    launches = 0
    while True:
        for _ in range(16):
            launch()
        launches += 16
        synchronize()
        elapsed = time.perf_counter() - start
        now = int(nvml.nvmlDeviceGetTotalEnergyConsumption(handle))
        if (elapsed >= 0.25 and now > first) or launches >= 100_000:
            break
    return {"energy_mj": (now - first) / launches, "power_w": (now - first) / 1000.0 / elapsed,
            "launches": launches, "window_s": elapsed}  # fmt: skip


def counter_period(nvml: Any, handle: Any, seconds: float) -> dict[str, Any]:
    """Poll the counter for ``seconds`` on an idle GPU and report the intervals between its steps
    (under load, every reading of the meter reports them: ``energy_counter_period_ms``)."""
    steps: list[float] = []
    last = int(nvml.nvmlDeviceGetTotalEnergyConsumption(handle))
    polls = 0
    start = time.perf_counter()
    while time.perf_counter() - start < seconds:
        value = int(nvml.nvmlDeviceGetTotalEnergyConsumption(handle))
        polls += 1
        if value != last:
            steps.append(time.perf_counter())
            last = value
    gaps = [(b - a) * 1000 for a, b in itertools.pairwise(steps)]
    return {"polls": polls, "poll_us": round((time.perf_counter() - start) / polls * 1e6, 1), "steps": len(steps),
            "period_ms_median": round(statistics.median(gaps), 3) if gaps else None,
            "period_ms_min": round(min(gaps), 3) if gaps else None,
            "period_ms_max": round(max(gaps), 3) if gaps else None}  # fmt: skip


def rel_diffs(values: dict[str, list[float]]) -> dict[str, Any]:
    diffs = [abs(v[0] - v[1]) / ((v[0] + v[1]) / 2) for v in values.values() if len(v) >= 2 and v[0] + v[1] > 0]
    if not diffs:
        return {}
    return {
        "configs": len(diffs),
        "median_rel_diff": round(statistics.median(diffs), 4),
        "max_rel_diff": round(max(diffs), 4),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--farm-report", type=Path, required=True)
    parser.add_argument("--kernel", action="append", default=[])
    parser.add_argument("--configs", type=int, default=6)
    parser.add_argument("--passes", type=int, default=2)
    parser.add_argument("--out", type=Path, default=Path("."))
    args = parser.parse_args()
    import cupy as cp
    import pynvml

    pynvml.nvmlInit()
    handle = pynvml.nvmlDeviceGetHandleByIndex(0)
    meter = EnergyMeter(pynvml, 0)
    cc = "{}.{}".format(*str(cp.cuda.Device().compute_capability))
    farm = json.loads(args.farm_report.read_text())
    report: dict[str, Any] = {"gpu": pynvml.nvmlDeviceGetName(handle), "driver": pynvml.nvmlSystemGetDriverVersion(),
                              "meter": {k: getattr(meter, k) for k in ("window_s", "windows", "chunk_s", "lead_s")},
                              "counter_idle": counter_period(pynvml, handle, 0.6), "kernels": {}}  # fmt: skip
    out = args.out / "energy_repeat.json"
    session = Session(CubinLoader())
    session.warm()
    stream = cp.cuda.get_current_stream()

    def mark() -> Any:
        event = cp.cuda.Event(disable_timing=True)
        event.record(stream)
        return lambda: event.done

    cache = tempfile.mkdtemp(prefix="kf-cubins-")
    for name in args.kernel or ["matmul_fp32", "layernorm"]:
        spec = get_kernel(name)
        impl = cuda_impl(spec)
        assert impl is not None
        problem = spec.normalize_problem(None)
        jobs = [j for j in farm["jobs"] if j["kernel"] == name]
        seen = [
            {json.dumps(t["config"], sort_keys=True) for t in j["trials"] if t["state"] == "complete"} for j in jobs
        ]
        common = sorted(set.intersection(*seen))[: args.configs]
        kernel = session.loader.implementation(spec)
        buffers, _ = session.data(spec, kernel, problem, 1)
        runs = {}
        for key in common:
            config = json.loads(key)
            compiled = compile_job(
                CompileJob.for_config(spec, config, problem, arch_for(cc, impl.arch_specific)), cache
            )
            if compiled.artifact is None:
                print("compile failed", name, key, compiled.log[-300:], flush=True)
                continue
            runs[key] = session.loader.load(compiled.artifact, spec, config, problem).bind(buffers, problem)
        rows: dict[str, dict[str, list[Any]]] = {k: {"time_ms": [], "first": [], "current": []} for k in runs}
        for _ in range(args.passes):
            for key, run in runs.items():
                stats = time_kernel(run, flush=session.flush)
                median_ms = statistics.median(stats.times_ms)
                old = first_meter(pynvml, handle, run, stream.synchronize)
                started = time.perf_counter()
                new = meter.measure(run, stream.synchronize, mark, median_ms / 1000).metrics()
                new["energy_s"] = time.perf_counter() - started  # what the reading cost the trial
                rows[key]["time_ms"].append(median_ms)
                rows[key]["first"].append(old)
                rows[key]["current"].append(new)
        ratio_first = [
            x["window_s"] / x["launches"] * 1000 / t
            for r in rows.values()
            for x, t in zip(r["first"], r["time_ms"], strict=True)
        ]
        ratio_current = [
            x["energy_launch_ms"] / t for r in rows.values() for x, t in zip(r["current"], r["time_ms"], strict=True)
        ]
        summary = {
            "time": rel_diffs({k: r["time_ms"] for k, r in rows.items()}),
            "first_meter": rel_diffs({k: [x["energy_mj"] for x in r["first"]] for k, r in rows.items()}),
            "current_meter": rel_diffs({k: [x["energy_mj"] for x in r["current"]] for k, r in rows.items()}),
            "current_spread_median": statistics.median(x["energy_spread"] for r in rows.values() for x in r["current"]),
            # seconds per launch in the energy stretch / the timed median: 1 = back to back
            "first_launch_over_time": statistics.median(ratio_first),
            "current_launch_over_time": statistics.median(ratio_current),
            "current_launch_over_time_max": max(ratio_current),
            "current_energy_s_median": statistics.median(x["energy_s"] for r in rows.values() for x in r["current"]),
        }
        report["kernels"][name] = {"problem": problem, "configs": rows, **summary}
        print(name, json.dumps(summary), flush=True)
        out.write_text(json.dumps(report, indent=1, default=str) + "\n")
    print("counter (idle)", json.dumps(report["counter_idle"]), flush=True)


if __name__ == "__main__":
    main()
