"""Where an eager GPT-2 inference's latency goes on the GPU machine (issue 19's swap target).

Eager GPT-2 small (bf16, 8 x 512) is launch-bound: the host enqueues its ~230 kernels more slowly than the
device runs them. This measures, by turns in one process (A B C D ... repeated):

- ``eager``: the model as `kernelfarm profile-model` builds it;
- ``lm_head``: the LM head swapped for the farm-tuned ``matmul_triton`` product (``--config`` JSON, the
  farm's best, as ``--swap`` does);
- ``fused_gelu``: GPT-2's GELU (eight elementwise kernels per layer in transformers' ``NewGELUActivation``)
  computed by one fused ``torch.nn.functional.gelu(approximate="tanh")`` (same function): how much fewer
  launches would give;
- ``both``: the two together;
- ``farm_mlp``: each MLP's ``c_fc`` and GELU replaced by one launch of the farm's fused
  ``matmul_bias_gelu_triton`` kernel (tanh GELU, as ``--swap`` puts in a tuned one) with a fixed config
  from its space (``--mlp-config`` JSON to give another, e.g. the farm's best): no farm needed;
- ``lm_head_farm_mlp``: the LM head and the fused MLPs together.

Each variant's logits are also checked as ``--swap`` checks them: against a float32 copy of the model,
within the larger of 1e-2 and 1.5 x eager's own error (``checks``).

For each: the latency (synchronised), the host's enqueue time (the forward's wall time without a
synchronise, after one), kernels per inference and the device's busy time (torch.profiler, one inference).
``--pin`` repeats the whole set pinned to one CPU core.

Run on the GPU machine from the repository root (kernelfarm importable):
    python3 benchmarks/profiler/eager_host.py --out DIR
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import statistics
import time
from pathlib import Path
from typing import Any

import torch

from kernelfarm.kernels.registry import get_kernel
from kernelfarm.model_profiler import fusion, models, swap

RUN4_LM_HEAD = {  # the farm's best for the LM head in run 4 (benchmarks/profiler/results/...-run4-gpt2-profile.json)
    "operator": "aten::mm",
    "kernel": "matmul_triton",
    "problem": {"M": 4096, "N": 50257, "K": 768, "dtype": "bfloat16", "b_layout": "nk"},
    "kernel_problem": {"M": 4096, "N": 50264, "K": 768, "dtype": "bfloat16", "b_layout": "nk"},
    "config": {"TMA": 1, "BLOCK_K": 64, "BLOCK_M": 128, "BLOCK_N": 256, "GROUP_M": 8, "SUBTILE": 1,
               "num_warps": 8, "num_stages": 4},
}  # fmt: skip
# A fixed, reasonable config of the fused kernel's space (matmul_triton's) for GPT-2's 4096 x 768 -> 3072:
# persistent TMA schedule, 128 x 128 tiles, 4 stages. Not tuned: the farm's best can only be faster.
FUSED_MLP_CONFIG = {"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 64, "GROUP_M": 8, "num_warps": 8, "num_stages": 4,
                    "TMA": 1, "SUBTILE": 0}  # fmt: skip
VARIANTS: dict[str, tuple[str, ...]] = {
    "eager": (), "lm_head": ("lm_head",), "fused_gelu": ("fused_gelu",), "both": ("lm_head", "fused_gelu"),
    "farm_mlp": ("farm_mlp",), "lm_head_farm_mlp": ("lm_head", "farm_mlp"),
}  # fmt: skip


def fused_gelu(x: torch.Tensor) -> torch.Tensor:
    return torch.nn.functional.gelu(x, approximate="tanh")


def set_variant(model: Any, pieces: dict[str, dict[str, Any]], on: tuple[str, ...]) -> None:
    """The modules' own forwards, then the forwards of the pieces ``on`` (piece -> module name -> forward)."""
    modules = dict(model.named_modules())
    for forwards in pieces.values():
        for name in forwards:
            modules[name].__dict__.pop("forward", None)
    for piece in on:
        for name, forward in pieces[piece].items():
            modules[name].forward = forward


def measure(run: Any, iterations: int) -> tuple[list[float], list[float]]:
    latencies, enqueues = [], []
    for _ in range(iterations):
        torch.cuda.synchronize()
        start = time.perf_counter()
        run()
        enqueued = time.perf_counter()
        torch.cuda.synchronize()
        end = time.perf_counter()
        latencies.append((end - start) * 1e3)
        enqueues.append((enqueued - start) * 1e3)
    return latencies, enqueues


def kernels(run: Any) -> dict[str, float]:
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        run()
        torch.cuda.synchronize()
    events = [e for e in prof.events() if e.device_type.name == "CUDA"]
    busy = sum(e.device_time for e in events) / 1e3
    return {"kernels": len(events), "device_busy_ms": busy}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--iterations", type=int, default=10)
    parser.add_argument("--pin", action="store_true", help="also run the set pinned to one CPU core")
    parser.add_argument("--no-direct", action="store_true",
                        help="launch the farm kernels through their jit function (swap.DIRECT_LAUNCH off)")  # fmt: skip
    parser.add_argument("--out", type=Path, default=Path("."))
    parser.add_argument("--mlp-config", type=json.loads, default=FUSED_MLP_CONFIG,
                        help="JSON config of matmul_bias_gelu_triton for the farm_mlp variants")  # fmt: skip
    args = parser.parse_args()
    swap.DIRECT_LAUNCH = not args.no_direct
    mut = models.build("gpt2", dtype="bfloat16", batch=8, seq=512, device="cuda")
    model = mut.model

    def run() -> Any:
        with torch.inference_mode():
            return model(**mut.inputs)

    exact = swap.float32_logits(mut)  # before any swap: a copy would carry the swapped forwards
    (candidate,) = fusion.fused_mlp_candidates(mut)
    problem = candidate["problem"]
    fused_space = get_kernel("matmul_bias_gelu_triton").space
    assert dict(args.mlp_config) in [dict(c) for c in fused_space.valid_configs(problem)], args.mlp_config
    names = swap.swap_in(model, RUN4_LM_HEAD)
    assert names == ["lm_head"], names
    mlp_entry = {"kernel_problem": problem, "config": args.mlp_config, "modules": candidate["modules"]}
    mlp_names = swap.swap_in_fused(model, mlp_entry)
    assert len(mlp_names) == 2 * len(candidate["modules"]), mlp_names
    modules = dict(model.named_modules())
    gelu_names = [n for n, m in modules.items() if type(m).__name__ == "NewGELUActivation"]
    pieces = {
        "lm_head": {"lm_head": modules["lm_head"].__dict__["forward"]},
        "fused_gelu": dict.fromkeys(gelu_names, fused_gelu),
        "farm_mlp": {n: modules[n].__dict__["forward"] for n in mlp_names},
    }
    set_variant(model, pieces, ())
    gelu_module = modules[gelu_names[0]]
    x = torch.randn(4096, 3072, device="cuda", dtype=torch.bfloat16)
    reference_gelu = type(gelu_module).forward(gelu_module, x)
    gelu_error = float((fused_gelu(x) - reference_gelu).abs().max())
    report: dict[str, Any] = {"device": torch.cuda.get_device_name(), "torch": torch.__version__,
                              "cpus": os.cpu_count(), "gelu_modules": len(gelu_names),
                              "fused_gelu_max_abs_error": gelu_error, "farm_mlp_problem": problem,
                              "farm_mlp_config": args.mlp_config, "direct_launch": swap.DIRECT_LAUNCH,
                              "mlp_pair_baseline_ms": candidate["baseline_ms"], "sets": {}}  # fmt: skip
    with torch.inference_mode():
        reference = run().logits.float()
    for name, on in VARIANTS.items():
        set_variant(model, pieces, on)
        with torch.inference_mode():
            out = run().logits.float()
        report.setdefault("errors", {})[name] = float((out - reference).norm() / reference.norm())
        report.setdefault("checks", {})[name] = swap.output_check(reference, out, exact, float32_copy=True)
        for _ in range(3):
            run()
        report.setdefault("kernels", {})[name] = kernels(run)
    pins = [None, min(os.sched_getaffinity(0))] if args.pin else [None]
    for pin in pins:
        label = "unpinned" if pin is None else f"pinned to cpu {pin}"
        original = os.sched_getaffinity(0)
        if pin is not None:
            os.sched_setaffinity(0, {pin})
        results: dict[str, dict[str, list[float]]] = {n: {"latency": [], "enqueue": []} for n in VARIANTS}
        load = os.getloadavg()[0]
        for _ in range(args.rounds):
            for name, on in VARIANTS.items():
                set_variant(model, pieces, on)
                for _ in range(3):
                    run()
                latencies, enqueues = measure(run, args.iterations)
                results[name]["latency"] += latencies
                results[name]["enqueue"] += enqueues
        with contextlib.suppress(OSError):
            os.sched_setaffinity(0, original)
        summary = {
            n: {"latency_ms": statistics.median(r["latency"]), "enqueue_ms": statistics.median(r["enqueue"]),
                "latency_p10_p90": [sorted(r["latency"])[len(r["latency"]) // 10],
                                    sorted(r["latency"])[math.ceil(len(r["latency"]) * 0.9) - 1]],
                "runs_ms": r["latency"]}
            for n, r in results.items()
        }  # fmt: skip
        base = summary["eager"]["latency_ms"]
        for n in summary:
            summary[n]["speedup_vs_eager"] = base / summary[n]["latency_ms"]
        report["sets"][label] = {"load_average_before": load, **summary}
        print(label, {n: (round(s["latency_ms"], 2), round(s["enqueue_ms"], 2), round(s["speedup_vs_eager"], 3))
                      for n, s in summary.items()})  # fmt: skip
    print(json.dumps({k: v for k, v in report.items() if k != "sets"}, indent=1))
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "eager_host.json").write_text(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
