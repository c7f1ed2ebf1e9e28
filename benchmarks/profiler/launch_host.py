"""Host time per call of the swapped kernels against the torch operators they replace (issue 19's swap).

Eager GPT-2 small (bf16, 8 x 512) is bound by the host's enqueueing, so what a swapped call costs the host
decides the end-to-end gain as much as the kernel's device time. For GPT-2's MLP (``c_fc`` + GELU,
4096 x 768 -> 3072) and the LM head (4096 x 768 -> 50264), one after the other in one process:

- ``torch``: the operators eager runs (``addmm`` and transformers' eight-op ``NewGELUActivation``; ``mm``);
- ``jit``: the farm's kernel through its ``@triton.jit`` function (``swap.DIRECT_LAUNCH = False``);
- ``direct``: the same compiled kernel launched directly (model_profiler/swap.py ``_DirectLaunch``),

each with a TMA config and a tiled one. A figure is the median over ``--rounds`` of the wall time to enqueue
``--calls`` calls (synchronised before, not after) divided by the calls.

Run on the GPU machine from the repository root (kernelfarm importable):
    python3 benchmarks/profiler/launch_host.py --out DIR
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path
from typing import Any

import torch

from kernelfarm.model_profiler import swap

TMA = {"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 64, "GROUP_M": 8, "num_warps": 8, "num_stages": 4, "TMA": 1,
       "SUBTILE": 0}  # fmt: skip
TILED = {**TMA, "TMA": 0}
LM_HEAD_TMA = {"TMA": 1, "BLOCK_K": 64, "BLOCK_M": 128, "BLOCK_N": 256, "GROUP_M": 8, "SUBTILE": 1,
               "num_warps": 8, "num_stages": 4}  # fmt: skip  # the farm's best in run 4
LM_HEAD_TILED = {**LM_HEAD_TMA, "TMA": 0, "SUBTILE": 0}


def per_call_us(call: Any, calls: int, rounds: int) -> float:
    for _ in range(3):
        call()
    samples = []
    for _ in range(rounds):
        torch.cuda.synchronize()
        start = time.perf_counter()
        for _ in range(calls):
            call()
        samples.append((time.perf_counter() - start) / calls * 1e6)
    torch.cuda.synchronize()
    return statistics.median(samples)


def values(kernel: str, config: dict[str, int]) -> list[int]:
    return [int(config[name]) for name in swap._config_order(kernel)]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--out", type=Path, default=Path("."))
    args = parser.parse_args()
    from transformers.activations import NewGELUActivation

    device, dtype = "cuda", torch.bfloat16
    x = torch.randn(4096, 768, device=device, dtype=dtype)
    w_fc = torch.randn(768, 3072, device=device, dtype=dtype) / 28  # GPT-2's Conv1D: K x N
    bias = torch.randn(3072, device=device, dtype=dtype)
    w_head = torch.randn(50264, 768, device=device, dtype=dtype) / 28  # Linear: N x K (padded N)
    gelu = NewGELUActivation()
    rows: dict[str, dict[str, float]] = {"mlp": {}, "lm_head": {}}
    rows["mlp"]["torch"] = per_call_us(lambda: gelu(torch.addmm(bias, x, w_fc)), args.calls, args.rounds)
    rows["lm_head"]["torch"] = per_call_us(lambda: torch.mm(x, w_head.t()), args.calls, args.rounds)
    checks = {}
    for label, config in (("tma", TMA), ("tiled", TILED)):
        fused = values("matmul_bias_gelu_triton", config)
        for direct in (False, True):
            swap.DIRECT_LAUNCH = direct
            swap._direct.clear()
            call = lambda fused=fused: swap._launch_fused(x, w_fc, bias, False, "tanh", fused)  # noqa: E731
            rows["mlp"][f"{'direct' if direct else 'jit'}_{label}"] = per_call_us(call, args.calls, args.rounds)
            checks[f"mlp_{label}_direct_taken"] = any(v is not None for v in swap._direct.values()) if direct else None
        reference = gelu(torch.addmm(bias, x, w_fc)).float()
        out = swap._launch_fused(x, w_fc, bias, False, "tanh", fused).float()
        checks[f"mlp_{label}_max_abs_error"] = float((out - reference).abs().max())
    for label, config in (("tma", LM_HEAD_TMA), ("tiled", LM_HEAD_TILED)):
        head = values("matmul_triton", config)
        for direct in (False, True):
            swap.DIRECT_LAUNCH = direct
            swap._direct.clear()
            call = lambda head=head: swap._launch(x, w_head, True, head)  # noqa: E731
            rows["lm_head"][f"{'direct' if direct else 'jit'}_{label}"] = per_call_us(call, args.calls, args.rounds)
    swap.DIRECT_LAUNCH = True
    report = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "calls": args.calls,
              "rounds": args.rounds, "host_us_per_call": rows, "checks": checks}  # fmt: skip
    print(json.dumps(report, indent=1))
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "launch_host.json").write_text(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
