"""Where an eager GPT-2 inference's latency goes on the GPU machine (issue 19's swap target).

Eager GPT-2 small (bf16, 8 x 512) is launch-bound: the host enqueues its ~230 kernels more slowly than the
device runs them. This measures, by turns in one process (A B C D ... repeated):

- ``eager``: the model as `kernelfarm profile-model` builds it;
- ``lm_head``: the LM head swapped for the farm-tuned ``matmul_triton`` product (``--config`` JSON, the
  farm's best, as ``--swap`` does);
- ``fused_gelu``: GPT-2's GELU (eight elementwise kernels per layer in transformers' ``NewGELUActivation``)
  computed by one fused ``torch.nn.functional.gelu(approximate="tanh")`` (same function): how much fewer
  launches would give;
- ``both``: the two together.

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

from kernelfarm.model_profiler import models, swap

RUN4_LM_HEAD = {  # the farm's best for the LM head in run 4 (benchmarks/profiler/results/...-run4-gpt2-profile.json)
    "operator": "aten::mm",
    "kernel": "matmul_triton",
    "problem": {"M": 4096, "N": 50257, "K": 768, "dtype": "bfloat16", "b_layout": "nk"},
    "kernel_problem": {"M": 4096, "N": 50264, "K": 768, "dtype": "bfloat16", "b_layout": "nk"},
    "config": {"TMA": 1, "BLOCK_K": 64, "BLOCK_M": 128, "BLOCK_N": 256, "GROUP_M": 8, "SUBTILE": 1,
               "num_warps": 8, "num_stages": 4},  # fmt: skip
}


def fused_gelu(x: torch.Tensor) -> torch.Tensor:
    return torch.nn.functional.gelu(x, approximate="tanh")


def set_variant(model: Any, lm_forward: Any, gelu_modules: list[Any], *, lm_head: bool, gelu: bool) -> None:
    if lm_head:
        model.lm_head.forward = lm_forward
    else:
        model.lm_head.__dict__.pop("forward", None)
    for module in gelu_modules:
        if gelu:
            module.forward = fused_gelu
        else:
            module.__dict__.pop("forward", None)


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
    parser.add_argument("--out", type=Path, default=Path("."))
    args = parser.parse_args()
    mut = models.build("gpt2", dtype="bfloat16", batch=8, seq=512, device="cuda")
    model = mut.model

    def run() -> Any:
        with torch.inference_mode():
            return model(**mut.inputs)

    names = swap.swap_in(model, RUN4_LM_HEAD)
    assert names == ["lm_head"], names
    lm_forward = model.lm_head.__dict__["forward"]
    gelu_modules = [m for m in model.modules() if type(m).__name__ == "NewGELUActivation"]
    x = torch.randn(4096, 3072, device="cuda", dtype=torch.bfloat16)
    reference_gelu = type(gelu_modules[0]).forward(gelu_modules[0], x)
    gelu_error = float((fused_gelu(x) - reference_gelu).abs().max())
    variants = {"eager": (False, False), "lm_head": (True, False), "fused_gelu": (False, True), "both": (True, True)}
    report: dict[str, Any] = {"device": torch.cuda.get_device_name(), "torch": torch.__version__,
                              "cpus": os.cpu_count(), "gelu_modules": len(gelu_modules),
                              "fused_gelu_max_abs_error": gelu_error, "sets": {}}  # fmt: skip
    with torch.inference_mode():
        reference = run().logits.float()
    for name, (lm, gelu) in variants.items():
        set_variant(model, lm_forward, gelu_modules, lm_head=lm, gelu=gelu)
        with torch.inference_mode():
            out = run().logits.float()
        report.setdefault("errors", {})[name] = float((out - reference).norm() / reference.norm())
        for _ in range(3):
            run()
        report.setdefault("kernels", {})[name] = kernels(run)
    pins = [None, min(os.sched_getaffinity(0))] if args.pin else [None]
    for pin in pins:
        label = "unpinned" if pin is None else f"pinned to cpu {pin}"
        original = os.sched_getaffinity(0)
        if pin is not None:
            os.sched_setaffinity(0, {pin})
        results: dict[str, dict[str, list[float]]] = {n: {"latency": [], "enqueue": []} for n in variants}
        load = os.getloadavg()[0]
        for _ in range(args.rounds):
            for name, (lm, gelu) in variants.items():
                set_variant(model, lm_forward, gelu_modules, lm_head=lm, gelu=gelu)
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
                "runs_ms": r["latency"]}  # fmt: skip
            for n, r in results.items()
        }
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
