"""GPU benchmark: sweep kernels through the real cuda backend, save landscapes, compare the best
configs with library baselines in the same run, and measure the pipeline's own costs.

    python3 benchmarks/gpu/sweep.py --plan full --out /tmp/kf-bench [--landscapes kernels]

Prints markdown tables at the end and writes results.json (+ landscapes) under --out. Needs CuPy,
torch (baselines), nvidia-ml-py and ncu; nothing of the farm's server side.
"""

from __future__ import annotations

import argparse
import json
import logging
import random
import sys
import time
from collections.abc import Mapping
from dataclasses import asdict
from pathlib import Path
from typing import Any

# Run as a script (`python3 benchmarks/gpu/sweep.py`): its folder is first on sys.path, so its neighbours
# import by their own names and kernelfarm comes from the installed package, never from the checkout.
from baselines import time_copy, time_library, torch_baseline
from landscape_writer import problem_slug, write_landscape

from kernelfarm.core.measurement import Measurement
from kernelfarm.kernels.registry import get_kernel
from kernelfarm.worker.backends.base import MeasureRequest
from kernelfarm.worker.backends.cuda import CudaBackend, CudaBackendOptions
from kernelfarm.worker.measuring.timing import TimingPolicy

logger = logging.getLogger("sweep")

ROW_PROBLEMS = [
    {"M": 8192, "N": 4096, "dtype": "float32"},
    {"M": 8192, "N": 4096, "dtype": "bfloat16"},
    {"M": 8192, "N": 8192, "dtype": "bfloat16"},
]
PLANS: dict[str, list[tuple[str, dict[str, Any], int]]] = {
    "quick": [
        ("layernorm", ROW_PROBLEMS[0], 8),
        ("softmax", ROW_PROBLEMS[1], 8),
        ("matmul_fp32", {"M": 2048, "N": 2048, "K": 2048}, 8),
        ("matmul_bf16", {"M": 4096, "N": 4096, "K": 4096}, 8),
    ],
    "full": [
        *[("layernorm", p, 300) for p in ROW_PROBLEMS],
        *[("softmax", p, 300) for p in ROW_PROBLEMS],
        ("matmul_fp32", {"M": 4096, "N": 4096, "K": 4096}, 260),
        ("matmul_fp32", {"M": 2048, "N": 2048, "K": 2048}, 160),
        ("matmul_bf16", {"M": 4096, "N": 4096, "K": 4096}, 220),
        ("matmul_bf16", {"M": 8192, "N": 8192, "K": 8192}, 100),
        ("matmul_bf16_wgmma", {"M": 4096, "N": 4096, "K": 4096}, 240),
        ("matmul_bf16_wgmma", {"M": 8192, "N": 8192, "K": 8192}, 120),
        ("flash_attention", {"B": 4, "H": 16, "S": 4096, "D": 128, "causal": 0}, 200),
        ("flash_attention", {"B": 4, "H": 16, "S": 4096, "D": 64, "causal": 1}, 200),
        ("conv2d", {"N": 32, "H": 28, "W": 28, "C": 256, "K": 256, "R": 3}, 200),
        ("conv2d", {"N": 32, "H": 56, "W": 56, "C": 64, "K": 64, "R": 3}, 150),
    ],
}
SWEEP_POLICY = TimingPolicy(warmup_s=0.01, min_reps=10, max_reps=200, max_time_s=0.4, target_rel_error=0.01)
FINAL_POLICY = TimingPolicy(warmup_s=0.1, min_reps=50, max_reps=1000, max_time_s=2.0, target_rel_error=0.002)


def sample(kernel: str, problem: Mapping[str, Any], n: int, seed: int = 0) -> list[dict[str, Any]]:
    configs = get_kernel(kernel).space.valid_configs(problem)
    if len(configs) <= n:
        return configs
    return random.Random(seed).sample(configs, n)


def sweep(backend: CudaBackend, kernel: str, problem: dict[str, Any], n: int) -> dict[str, Any]:
    configs = sample(kernel, problem, n)
    requests = [MeasureRequest(kernel, problem, c, profile=False, seed=1234) for c in configs]
    start = time.perf_counter()
    backend.prepare(requests)  # compile ahead on the CPU cores while the GPU measures
    results: list[tuple[dict[str, Any], Measurement]] = []
    for request in requests:
        results.append((dict(request.config), backend.measure(request)))
    wall = time.perf_counter() - start
    ok = [(c, m) for c, m in results if m.timing is not None]
    failures: dict[str, int] = {}
    for _, m in results:
        if m.failure is not None:
            failures[m.failure.value] = failures.get(m.failure.value, 0) + 1
    best_config, best = min(ok, key=lambda cm: cm[1].timing.median_ms) if ok else (None, None)  # type: ignore[union-attr]
    compile_s = [m.metrics.get("compile_s", 0.0) for _, m in results if not m.metrics.get("compile_cached")]
    gpu_s = sum(m.metrics.get("gpu_s", 0.0) for _, m in results)
    times = sorted(m.timing.median_ms for _, m in ok)  # type: ignore[union-attr]
    return {
        "kernel": kernel,
        "problem": problem,
        "sampled": len(configs),
        "valid_space": len(get_kernel(kernel).space.valid_indices(problem)),
        "ok": len(ok),
        "failures": failures,
        "wall_s": wall,
        "gpu_s": gpu_s,
        "busy_fraction": gpu_s / wall if wall > 0 else 0.0,
        "compile_s_mean": sum(compile_s) / len(compile_s) if compile_s else 0.0,
        "compile_s_max": max(compile_s) if compile_s else 0.0,
        "compile_s_sum": sum(compile_s),
        "best_config": best_config,
        "best_ms": best.timing.median_ms if best and best.timing else None,
        "worst_ms": times[-1] if times else None,
        "median_config_ms": times[len(times) // 2] if times else None,
        "best_metrics": {k: v for k, v in (best.metrics if best else {}).items() if isinstance(v, int | float | str)},
        "best_cubin_key": best.provenance.get("cubin_key") if best else None,
        "results": results,
    }


def profile_overheads(backend: CudaBackend, kernel: str, problem: dict[str, Any], configs: list[dict]) -> dict:
    """ncu cost per trial: one process per trial (mode all, unbatched) vs one for a batch (top-k)."""
    out: dict[str, Any] = {"kernel": kernel, "problem": problem}
    reqs = [MeasureRequest(kernel, problem, c, profile=True, seed=1234) for c in configs]
    start = time.perf_counter()
    none = [backend.measure(MeasureRequest(kernel, problem, c, profile=False, seed=1234)) for c in configs]
    out["none_wall_per_trial_s"] = (time.perf_counter() - start) / len(configs)
    start = time.perf_counter()
    single = [backend.measure(r) for r in reqs[:2]]
    out["unbatched_wall_per_trial_s"] = (time.perf_counter() - start) / 2
    out["unbatched_ncu_s"] = [m.metrics.get("ncu_wall_s") for m in single]
    start = time.perf_counter()
    batch = backend.profile(reqs)
    out["batched_ncu_wall_s"] = time.perf_counter() - start
    out["batch_size"] = len(reqs)
    out["batched_ncu_per_trial_s"] = out["batched_ncu_wall_s"] / len(reqs)
    out["profile_errors"] = [b.error for b in batch if b.error]
    metrics = [dict(b.metrics or {}) for b in batch]
    out["sample_metrics"] = metrics[0] if metrics else {}
    out["ncu_vs_events"] = [
        (b.get("ncu_duration_ns", 0) * 1e-6) / m.timing.median_ms
        for b, m in zip(metrics, none, strict=True)
        if m.timing is not None and b.get("ncu_duration_ns")
    ]
    return out


ROW_KERNELS = ("layernorm", "softmax")


def best_from_landscapes(backend: CudaBackend, root: Path, gpu_model: str, plan: list) -> list[dict[str, Any]]:
    """Best config of each recorded landscape (instead of sweeping again), compiled for this GPU."""
    from kernelfarm.core.landscape import load_landscape

    out = []
    for kernel, problem, _ in plan:
        path = root / kernel / "landscapes" / f"{gpu_model}_{problem_slug(problem)}.json.gz"
        if not path.is_file():
            logger.warning("no landscape %s", path)
            continue
        landscape = load_landscape(path)
        key = min(landscape.valid_keys, key=lambda k: landscape.entries[k].time_ms or float("inf"))
        config = get_kernel(kernel).space.config_from_key(key)
        request = MeasureRequest(kernel, problem, config, profile=False, seed=99)
        compiled = backend.compile(request).result()
        out.append(
            {
                "kernel": kernel,
                "problem": problem,
                "best_config": config,
                "best_cubin_key": compiled.key,
                "recorded_best_ms": landscape.entries[key].time_ms,
            }
        )
    return out


def compare_with_library(sweeps: list[dict[str, Any]], cache_dir: Path, ceilings: Any) -> list[dict[str, Any]]:
    """Re-time each sweep's best config and the library call side by side in this process."""
    from kernelfarm.worker.cuda.implementation import cuda_impl
    from kernelfarm.worker.cuda.loader import CubinLoader
    from kernelfarm.worker.measuring.session import Session

    session = Session(CubinLoader())
    rows = []
    for s in sweeps:
        if s["best_config"] is None:
            continue
        kernel, problem = s["kernel"], s["problem"]
        impl = cuda_impl(get_kernel(kernel))
        assert impl is not None
        reply = session.measure(
            {
                "kernel": kernel,
                "problem": problem,
                "config": s["best_config"],
                "seed": 99,
                "artifact": str(cache_dir / "cubin" / f"{s['best_cubin_key']}.cubin"),
                "policy": asdict(FINAL_POLICY),
            }
        )
        ours_ms = sorted(reply["times_ms"])[len(reply["times_ms"]) // 2] if reply.get("status") == "ok" else None
        baseline = torch_baseline(kernel, problem)
        label, lib_ms = None, None
        if baseline is not None:
            label, launch = baseline
            lib_ms = time_library(launch, FINAL_POLICY).median_ms
        moved, flops = impl.bytes_moved(problem), impl.flops(problem)
        # The copy ceiling at this kernel's own size: short kernels pay launch ramp-up and tail too.
        copy_ms = time_copy(int(moved // 2), FINAL_POLICY).median_ms if kernel in ROW_KERNELS else None
        rows.append(
            {
                "kernel": kernel,
                "problem": problem,
                "ours_ms": ours_ms,
                "library": label,
                "library_ms": lib_ms,
                "speedup_vs_library": (lib_ms / ours_ms) if ours_ms and lib_ms else None,
                "ours_bytes_per_s": moved / (ours_ms * 1e-3) if ours_ms else None,
                "library_bytes_per_s": moved / (lib_ms * 1e-3) if lib_ms else None,
                "ours_flops_per_s": flops / (ours_ms * 1e-3) if ours_ms else None,
                "library_flops_per_s": flops / (lib_ms * 1e-3) if lib_ms else None,
                "copy_bw_fraction": (moved / (ours_ms * 1e-3)) / ceilings.dram_bytes_per_s
                if ours_ms and ceilings
                else None,
                "same_size_copy_ms": copy_ms,
                "same_size_copy_fraction": (copy_ms / ours_ms) if copy_ms and ours_ms else None,
                "verify": reply.get("status"),
                "rel_error": reply.get("rel_error"),
            }
        )
    return rows


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--plan", default="quick", choices=sorted(PLANS))
    parser.add_argument("--out", type=Path, default=Path("/tmp/kf-bench"))
    parser.add_argument(
        "--landscapes", type=Path, default=None, help="also write landscapes under <dir>/<kernel>/landscapes"
    )
    parser.add_argument("--cache", type=Path, default=Path("/tmp/kf-cuda-cache"))
    parser.add_argument("--only", default="", help="comma-separated kernels")
    parser.add_argument(
        "--compare-only",
        action="store_true",
        help="no sweeps: compare the best config of each landscape under --landscapes with the library",
    )
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    args.out.mkdir(parents=True, exist_ok=True)

    backend = CudaBackend(CudaBackendOptions(cache_dir=args.cache, policy=SWEEP_POLICY, timeout_s=30.0))
    ident = backend.identity()
    report: dict[str, Any] = {"device": asdict(ident), "plan": args.plan, "started": time.time()}
    t = time.perf_counter()
    ceilings = backend.ceilings()
    report["ceilings"] = asdict(ceilings) if ceilings else None
    report["ceilings_s"] = time.perf_counter() - t
    logger.info("device %s; ceilings %s", ident.gpu_name, report["ceilings"])

    sweeps = []
    only = set(filter(None, args.only.split(",")))
    plan = [item for item in PLANS[args.plan] if not only or item[0] in only]
    if args.compare_only:
        best = best_from_landscapes(backend, args.landscapes or Path("kernels"), ident.gpu_model, plan)
        backend.close()
        report["comparison"] = compare_with_library(best, args.cache, ceilings)
        (args.out / "results.json").write_text(json.dumps(report, indent=1, default=str))
        print(comparison_table(report))
        return 0
    for kernel, problem, n in plan:
        s = sweep(backend, kernel, problem, n)
        logger.info(
            "%s %s: %d ok, failures %s, best %.4f ms, wall %.1f s, busy %.0f%%",
            kernel,
            problem,
            s["ok"],
            s["failures"],
            s["best_ms"] or -1,
            s["wall_s"],
            100 * s["busy_fraction"],
        )
        if args.landscapes:
            spec = get_kernel(kernel)
            path = args.landscapes / kernel / "landscapes" / f"{ident.gpu_model}_{problem_slug(problem)}.json.gz"
            write_landscape(
                path,
                spec,
                ident.gpu_name,
                problem,
                s["results"],
                {
                    "gpu_uuid": ident.gpu_uuid,
                    "policy": asdict(SWEEP_POLICY),
                    "sampled": s["sampled"],
                    "valid_space": s["valid_space"],
                    "tool": "kernelfarm benchmarks/gpu/sweep.py",
                },
            )
        s.pop("results")
        sweeps.append(s)
    report["sweeps"] = sweeps

    if not only or "softmax" in only:
        configs = sample("softmax", ROW_PROBLEMS[0], 8, 5)
        report["profile"] = profile_overheads(backend, "softmax", ROW_PROBLEMS[0], configs)
        logger.info("profile overheads: %s", {k: v for k, v in report["profile"].items() if k != "sample_metrics"})
    report["child_restarts"] = backend._child.restarts
    backend.close()

    report["comparison"] = compare_with_library(sweeps, args.cache, ceilings)
    (args.out / "results.json").write_text(json.dumps(report, indent=1, default=str))
    print(tables(report))
    return 0


def comparison_table(report: dict[str, Any]) -> str:
    lines = [
        "| kernel | problem | ours ms | library | lib ms | ours/lib speed | % copy BW (1 GiB) | % same-size copy | "
        "ours TFLOP/s | lib TFLOP/s |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in report["comparison"]:
        lines.append(
            f"| {r['kernel']} | {problem_slug(r['problem'])} | {_f(r['ours_ms'], 4)} | {r['library']} | "
            f"{_f(r['library_ms'], 4)} | {_f(r['speedup_vs_library'], 2)} | "
            f"{_f(100 * (r['copy_bw_fraction'] or 0), 1)} | {_f(100 * (r['same_size_copy_fraction'] or 0), 1)} | "
            f"{_f((r['ours_flops_per_s'] or 0) / 1e12, 1)} | {_f((r['library_flops_per_s'] or 0) / 1e12, 1)} |"
        )
    return "\n".join(lines)


def tables(report: dict[str, Any]) -> str:
    d = report["device"]
    c = report["ceilings"] or {}
    lines = [
        f"\nGPU: {d['gpu_name']} (CC {d['compute_capability']}, driver {d['driver_version']}, "
        f"NVRTC {d['extra']['nvrtc_version']})",
        f"ceilings: copy {c.get('dram_bytes_per_s', 0) / 1e12:.2f} TB/s, SGEMM {c.get('fp32_flops', 0) / 1e12:.1f} "
        f"TFLOP/s, HGEMM {c.get('tensor_flops', 0) / 1e12:.0f} TFLOP/s",
        "",
        "| kernel | problem | ours ms | library | lib ms | speedup | ours TB/s | % copy BW | ours TFLOP/s |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in report["comparison"]:
        lines.append(
            f"| {r['kernel']} | {problem_slug(r['problem'])} | {_f(r['ours_ms'], 4)} | {r['library']} | "
            f"{_f(r['library_ms'], 4)} | {_f(r['speedup_vs_library'], 2)} | "
            f"{_f((r['ours_bytes_per_s'] or 0) / 1e12, 2)} | "
            f"{_f(100 * (r['copy_bw_fraction'] or 0), 1)} | {_f((r['ours_flops_per_s'] or 0) / 1e12, 1)} |"
        )
    lines += [
        "",
        "| kernel | problem | valid | sampled | ok | failures | best ms | median ms | worst ms | compile s "
        "mean/max | sweep wall s | GPU busy |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for s in report["sweeps"]:
        lines.append(
            f"| {s['kernel']} | {problem_slug(s['problem'])} | {s['valid_space']} | {s['sampled']} | {s['ok']} | "
            f"{s['failures'] or '-'} | {_f(s['best_ms'], 4)} | {_f(s['median_config_ms'], 4)} | "
            f"{_f(s['worst_ms'], 3)} | "
            f"{_f(s['compile_s_mean'], 2)}/{_f(s['compile_s_max'], 2)} | {_f(s['wall_s'], 1)} | "
            f"{_f(100 * s['busy_fraction'], 0)}% |"
        )
    p = report.get("profile")
    if not p:
        return "\n".join(lines)
    lines += [
        "",
        f"profile ({p['kernel']}): none {_f(p['none_wall_per_trial_s'], 3)} s/trial; unbatched ncu "
        f"{_f(p['unbatched_wall_per_trial_s'], 2)} s/trial; batched x{p['batch_size']} "
        f"{_f(p['batched_ncu_per_trial_s'], 2)} s/trial ({_f(p['batched_ncu_wall_s'], 1)} s); "
        f"ncu/events {[round(x, 3) for x in p['ncu_vs_events']]}; errors {p['profile_errors'][:1]}",
    ]
    return "\n".join(lines)


def _f(value: Any, digits: int) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


if __name__ == "__main__":
    sys.exit(main())
