"""Measure a few configs of one kernel through the real backend and print each outcome.

    python3 benchmarks/gpu/probe.py matmul_bf16_wgmma '{"M": 4096, "N": 4096, "K": 4096}' 6

Exits 0 when at least one config verified (a cheap gate before a long sweep).
"""

from __future__ import annotations

import json
import logging
import random
import sys

from kernelfarm.kernels.registry import get_kernel
from kernelfarm.worker.backends.base import MeasureRequest
from kernelfarm.worker.backends.cuda import CudaBackend, CudaBackendOptions


def main(kernel: str, problem_text: str, n: int) -> int:
    logging.basicConfig(level=logging.WARNING)
    problem = json.loads(problem_text)
    configs = get_kernel(kernel).space.valid_configs(problem)
    chosen = random.Random(1).sample(configs, min(n, len(configs)))
    backend = CudaBackend(CudaBackendOptions(roofline=False, timeout_s=20.0))
    ok = 0
    try:
        for m, config in zip(
            backend.measure_many([MeasureRequest(kernel, problem, c, False, 7) for c in chosen]), chosen, strict=True
        ):
            if m.timing is not None:
                ok += 1
                print("ok", config, f"{m.timing.median_ms:.4f} ms", f"rel_error {m.metrics.get('rel_error'):.2e}")
            else:
                print("FAILED", config, m.failure, (m.failure_message or "")[:400])
    finally:
        backend.close()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2], int(sys.argv[3])))
