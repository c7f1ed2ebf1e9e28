"""How far correct configs of every CUDA kernel are from their references: the data the tolerances in
the kernels' specs are set from (docs/benchmarks/GPU.md, "Tolerances").

For each CUDA kernel of the registry and each of its test problems and its default problem, up to
``--configs`` valid configs spread over the space are compiled ahead (all cores) and measured by the
real cuda backend (poisoned outputs, verification against the reference, a short timing). Every
measurement's errors are recorded, also for one that failed its check: norm (relative L2), element
(max |out-ref| / (|ref| + rms(ref))), max abs and max rel. The table printed last gives, per kernel
and problem, the worst of each over the configs that ran, and the tolerances the spec declares.

    python3 benchmarks/gpu/verify_errors.py --configs 12 --out DIR
"""

from __future__ import annotations

import argparse
import json
import logging
import tempfile
import time
from pathlib import Path
from typing import Any

from kernelfarm.kernels.cuda_kernel import CudaKernel
from kernelfarm.kernels.registry import all_kernels
from kernelfarm.worker.backends.base import MeasureRequest

ERRORS = ("rel_error", "element_error", "max_abs_error", "max_rel_error")


def spread(items: list[Any], count: int) -> list[Any]:
    """Up to ``count`` items evenly spread over ``items`` (first and last parts of a space differ most)."""
    if len(items) <= count:
        return list(items)
    step = (len(items) - 1) / (count - 1) if count > 1 else 0
    return [items[round(i * step)] for i in range(count)]


def plan(count: int, only: list[str]) -> list[tuple[str, dict[str, Any], list[dict[str, Any]]]]:
    cases = []
    for name, spec in sorted(all_kernels().items()):
        if "cuda" not in spec.backends or (only and name not in only):
            continue
        problems = [spec.normalize_problem(p) for p in (*spec.test_problems, spec.default_problem)]
        for problem in problems:
            cases.append((name, problem, spread(spec.space.valid_configs(problem), count)))
    return cases


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--configs", type=int, default=12, help="configs per kernel and problem")
    parser.add_argument("--kernel", action="append", default=[], help="only these kernels (repeatable)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)

    from kernelfarm.worker.backends.cuda import CudaBackend, CudaBackendOptions
    from kernelfarm.worker.measuring.timing import TimingPolicy

    cases = plan(args.configs, args.kernel)
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as cache:
        options = CudaBackendOptions(
            cache_dir=Path(cache), roofline=False, profile_standby=False,
            policy=TimingPolicy(warmup_s=0.005, min_reps=3, max_reps=10, max_time_s=0.05),
        )  # fmt: skip
        backend = CudaBackend(options)
        try:
            requests = [
                MeasureRequest(name, problem, config, profile=False, seed=args.seed)
                for name, problem, configs in cases
                for config in configs
            ]
            started = time.perf_counter()
            backend.prepare(requests)  # compile everything ahead on every core
            for request in requests:
                m = backend.measure(request)
                spec = backend.spec(request.kernel_name)
                tolerance = spec.impl("cuda", CudaKernel).tolerance(request.problem)
                rows.append({
                    "kernel": request.kernel_name, "problem": dict(request.problem), "config": dict(request.config),
                    "failure": m.failure.value if m.failure else None,
                    "message": (m.failure_message or "")[:300],
                    **{k: m.metrics.get(k) for k in ERRORS},
                    **{f"second_seed_{k}": m.metrics.get(f"second_seed_{k}") for k in ERRORS},
                    "tolerance_norm": tolerance.norm, "tolerance_element": tolerance.element,
                })  # fmt: skip
            wall = time.perf_counter() - started
        finally:
            backend.close()
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "verify_errors.json").write_text(json.dumps({"wall_s": wall, "rows": rows}, indent=1))
    print(table(rows))
    print(f"{len(rows)} measurements in {wall:.0f} s")


def table(rows: list[dict[str, Any]]) -> str:
    """Per kernel and problem: configs with errors, failures by kind, worst errors, declared tolerances."""
    groups: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for row in rows:
        groups.setdefault((row["kernel"], json.dumps(row["problem"], sort_keys=True)), []).append(row)
    lines = ["kernel | problem | n | failed | worst norm | worst element | worst max abs | tol norm | tol element"]
    for (kernel, problem), group in groups.items():
        measured = [r for r in group if r["rel_error"] is not None]
        failures: dict[str, int] = {}
        for r in group:
            if r["failure"]:
                failures[r["failure"]] = failures.get(r["failure"], 0) + 1

        def worst(key: str, measured: list[dict[str, Any]] = measured) -> str:
            values = [r[key] for r in measured if r[key] is not None]
            values += [r[f"second_seed_{key}"] for r in measured if r.get(f"second_seed_{key}") is not None]
            return f"{max(values):.3g}" if values else "-"

        lines.append(
            f"{kernel} | {problem} | {len(measured)} | {failures or ''} | {worst('rel_error')} | "
            f"{worst('element_error')} | {worst('max_abs_error')} | {group[0]['tolerance_norm']:.3g} | "
            f"{group[0]['tolerance_element']:.3g}"
        )
    return "\n".join(lines)


if __name__ == "__main__":
    main()
