"""Kernel Tuner's own example kernels, registered from a manifest only, brute-forced by the farm's
cuda backend and by Kernel Tuner 1.5.0 on the same GPU, side by side.

    python3 benchmarks/gpu/byok_kernel_tuner.py --kernel matmul --kernel convolution --out $OUT \
        [--restrict convolution="block_size_y >= 2 and block_size_y <= 8 and tile_size_x <= 2 and tile_size_y <= 2"]

The .cu files are Kernel Tuner's examples, unmodified, next to the manifests in
docs/examples/kernel_tuner/ (README.md there). The farm side is the worker's engine (the cuda
backend: compile ahead on the host's cores, the confined measuring child, the farm's timing): every
valid config is measured, as Kernel Tuner's default brute force does. Both run cold: a fresh cubin
cache for the farm, and NVRTC's/the driver's disk cache off (CUDA_CACHE_DISABLE=1, set by the caller)
for both. ``--restrict`` narrows a kernel's space by the same extra restriction for both tools (to
fit a time budget); the report says so.

Times: the farm reports each config's median over its repetitions, Kernel Tuner the mean of its 7
iterations ("time"); the report gives both tools' best and its config, and configs per hour (valid
configs measured / wall seconds of the tuning call, start-up excluded for both: the farm's compile
pool and measuring child are started first, Kernel Tuner's context is created by its first call).
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from kernelfarm.kernels.manifest.build import build_spec
from kernelfarm.kernels.manifest.bundle import check_bundle, parse_manifest_text
from kernelfarm.kernels.manifest.cuda import ManifestCudaKernel
from kernelfarm.kernels.spec import KernelSpec
from kernelfarm.worker.backends.base import MeasureRequest

logger = logging.getLogger("byok_kernel_tuner")
EXAMPLES = Path(__file__).resolve().parents[2] / "docs" / "examples" / "kernel_tuner"
# Kernel Tuner checks with an absolute tolerance; fp32 sums of 512 (matmul) and 289 (17 x 17 filter)
# products of N(0, 1) values differ from a float64 reference by ~1e-4.
KT_ATOL = 1e-3


def load(name: str, directory: Path, restriction: str | None) -> KernelSpec:
    manifest = parse_manifest_text((EXAMPLES / f"{name}.toml").read_bytes(), f"{name}.toml")
    if restriction:
        manifest["restrictions"] = [*manifest.get("restrictions", []), restriction]
    source = manifest["source"]["files"][0]
    bundle = check_bundle(manifest, {source: (EXAMPLES / source).read_bytes()})
    return build_spec(bundle, 1, directory)


def farm_brute_force(spec: KernelSpec, cache: Path) -> dict[str, Any]:
    from kernelfarm.worker.backends.cuda import CudaBackend, CudaBackendOptions

    problem = spec.normalize_problem(None)
    configs = spec.space.valid_configs(problem)
    backend = CudaBackend(CudaBackendOptions(cache_dir=cache, roofline=False, profile_standby=False),
                          specs={spec.name: spec})  # fmt: skip
    try:
        backend.warm_up()
        requests = [MeasureRequest(spec.name, problem, c, profile=False, seed=11, kernel_version=1) for c in configs]
        started = time.perf_counter()
        backend.prepare(requests)
        measurements = backend.measure_many(requests)
        wall = time.perf_counter() - started
        sandbox = backend._child.environment.get("sandbox")  # what the measuring child ran under
    finally:
        backend.close()
    rows = list(zip(configs, measurements, strict=True))
    ok = [(c, m) for c, m in rows if m.failure is None and m.verified and m.timing is not None]
    failures: dict[str, int] = {}
    for _, m in rows:
        if m.failure is not None:
            failures[m.failure.value] = failures.get(m.failure.value, 0) + 1
    best_config, best = min(ok, key=lambda item: item[1].timing.median_ms)  # type: ignore[union-attr]
    assert best.timing is not None
    return {
        "tool": "kernelfarm (cuda backend)", "configs": len(configs), "valid": len(ok), "failures": failures,
        "wall_s": wall, "configs_per_hour": len(configs) / wall * 3600,
        "best_ms_median": best.timing.median_ms, "best_ms_mean": sum(best.timing.times_ms) / len(best.timing.times_ms),
        "best_config": best_config, "source_hash": spec.source_hash, "sandbox": sandbox,
        "times_ms": {spec.space.key(c): sum(m.timing.times_ms) / len(m.timing.times_ms) for c, m in ok},  # type: ignore[union-attr]
        "first_failure": next((m.failure_message[:400] for _, m in rows if m.failure_message), None),
    }  # fmt: skip


def kernel_tuner_brute_force(spec: KernelSpec, stub_dir: Path) -> dict[str, Any]:
    import cupy as cp
    import numpy as np
    from kernel_tuner import tune_kernel

    impl = spec.impl("cuda", ManifestCudaKernel)
    manifest = impl.manifest
    problem = spec.normalize_problem(None)
    buffers = impl.make_inputs(problem, 11)
    reference = impl.reference(buffers, problem)
    args = [cp.asnumpy(a) if hasattr(a, "shape") else a for a in impl.arguments(buffers, problem)]
    names = [arg.name for arg in manifest.arguments]
    answer = [cp.asnumpy(reference[n]) if n in manifest.outputs else None for n in names]
    cmem = {symbol: cp.asnumpy(buffers[name]) for symbol, name in manifest.constant_memory.items()}
    sizes = tuple(int(e) if e.isdigit() else int(problem[e]) for e in manifest.launch.problem_size)
    source = impl.bundle.files[manifest.source.files[0]]
    started = time.perf_counter()
    results, env = tune_kernel(
        manifest.source.entry.name, source, sizes, args, dict(manifest.tune_params),
        grid_div_x=manifest.launch.grid_div_x, grid_div_y=manifest.launch.grid_div_y,
        restrictions=list(manifest.restrictions) or None,
        cmem_args=cmem or None, answer=answer, atol=KT_ATOL, lang="cupy", verbose=False,
        compiler_options=[f"-I{stub_dir}"],  # an empty stdio.h, as the farm's stub header
    )  # fmt: skip
    wall = time.perf_counter() - started
    ok = [r for r in results if isinstance(r.get("time"), float)]
    best = min(ok, key=lambda r: r["time"])
    return {
        "tool": "kernel_tuner", "version": _kt_version(), "configs": len(results), "valid": len(ok),
        "wall_s": wall, "configs_per_hour": len(results) / wall * 3600, "best_ms_mean": best["time"],
        "best_ms_median": float(np.median(best["times"])) if best.get("times") else None,
        "best_config": {k: best[k] for k in manifest.tune_params}, "device": env.get("device_name"),
        "times_ms": {spec.space.key({k: r[k] for k in manifest.tune_params}): r["time"] for r in ok},
    }  # fmt: skip


def compare(spec: KernelSpec, farm: dict[str, Any], kt: dict[str, Any]) -> dict[str, Any]:
    """The two bests on each tool's own clock (their timings differ: the farm flushes L2 between
    repetitions, Kernel Tuner does not), and configs per hour."""
    farm_best, kt_best = spec.space.key(farm["best_config"]), spec.space.key(kt["best_config"])
    return {
        "same_best_config": farm_best == kt_best,
        # Kernel Tuner's time of the farm's best config / Kernel Tuner's best: 1.0 = the farm found KT's best
        "farm_best_on_kt_clock": kt["times_ms"].get(farm_best, float("nan")) / kt["best_ms_mean"],
        # the farm's time of Kernel Tuner's best config / the farm's best
        "kt_best_on_farm_clock": farm["times_ms"].get(kt_best, float("nan")) / farm["best_ms_mean"],
        "farm_best_vs_kt_best_own_clocks": farm["best_ms_mean"] / kt["best_ms_mean"],
        "farm_rate_vs_kt_rate": farm["configs_per_hour"] / kt["configs_per_hour"],
    }


def _kt_version() -> str:
    from importlib.metadata import version

    return version("kernel_tuner")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kernel", action="append", default=[])
    parser.add_argument("--restrict", action="append", default=[], help="KERNEL=EXPRESSION (same for both tools)")
    parser.add_argument("--no-kt", action="store_true")
    parser.add_argument("--out", type=Path, default=Path("."))
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    restrictions = dict(item.split("=", 1) for item in args.restrict)
    report: dict[str, Any] = {}
    out = args.out / "byok_kernel_tuner.json"
    with tempfile.TemporaryDirectory() as scratch:
        stub = Path(scratch) / "stub"
        stub.mkdir()
        (stub / "stdio.h").write_text("")
        for name in args.kernel or ["matmul"]:
            spec = load(name, Path(scratch) / f"bundle-{name}", restrictions.get(name))
            entry: dict[str, Any] = {"restriction": restrictions.get(name)}
            report[name] = entry
            entry["farm"] = farm_brute_force(spec, Path(scratch) / f"cubins-{name}")
            out.write_text(json.dumps(report, indent=2, default=str))
            if not args.no_kt:
                try:
                    entry["kernel_tuner"] = kernel_tuner_brute_force(spec, stub)
                except Exception as exc:  # keep the farm's figures
                    logger.exception("Kernel Tuner failed")
                    entry["kernel_tuner"] = {"error": repr(exc)}
                kt = entry["kernel_tuner"]
                if "best_ms_mean" in kt:
                    entry |= compare(spec, entry["farm"], kt)
            out.write_text(json.dumps(report, indent=2, default=str))
    json.dump(report, sys.stdout, indent=2, default=str)


if __name__ == "__main__":
    main()
