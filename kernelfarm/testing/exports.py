"""A best-config export built by hand: several GPU models and problems, for tests of the writers,
the runtime lookup and the Triton drop-in that need no farm."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from kernelfarm.core.exports.model import BestEntry, BestExport, Toolchain


def entry(gpu_model: str, problem: dict[str, Any], config: dict[str, Any], time_ms: float,
          compute_capability: str | None = None, gpu_name: str | None = None) -> BestEntry:  # fmt: skip
    return BestEntry(
        gpu_model=gpu_model, gpu_name=gpu_name, compute_capability=compute_capability, problem=problem,
        problem_key=",".join(f"{k}={v}" for k, v in problem.items()), config=config,
        config_key=",".join(str(v) for v in config.values()), time_ms=time_ms, time_p20_ms=time_ms * 0.99,
        time_p80_ms=time_ms * 1.01, toolchain=Toolchain(backend="cuda", driver_version="580.1", cuda_version="13.0",
        nvrtc_version="13.0"), trial_id=1, job_id="00000000-0000-0000-0000-000000000001",
    )  # fmt: skip


def sample_export() -> BestExport:
    """matmul-like kernel: H100 measured on two problems, A100 on one, an L4 on one."""
    small, large = {"M": 1024, "N": 1024, "K": 1024}, {"M": 4096, "N": 4096, "K": 4096}
    h100, a100, l4 = "nvidia-h100-80gb-hbm3", "nvidia-a100-sxm4-80gb", "nvidia-l4"

    def cfg(m: int, n: int, warps: int, stages: int) -> dict[str, int]:
        return {"block_size_m": m, "block_size_n": n, "num_warps": warps, "num_stages": stages}

    return BestExport(
        kernel="matmul_demo", kernel_version=2, source_hash="ab" * 32,
        parameters=["block_size_m", "block_size_n", "num_warps", "num_stages"], problem_params=["M", "N", "K"],
        default_problem=large, generated_at=datetime(2026, 11, 24, tzinfo=UTC),
        entries=[
            entry(h100, large, cfg(128, 256, 8, 3), 0.5, "9.0", "NVIDIA H100 80GB HBM3"),
            entry(h100, small, cfg(64, 64, 4, 4), 0.05, "9.0", "NVIDIA H100 80GB HBM3"),
            entry(a100, large, cfg(128, 128, 4, 3), 1.1, "8.0", "NVIDIA A100-SXM4-80GB"),
            entry(l4, large, cfg(128, 128, 4, 3), 3.0, "8.9", "NVIDIA L4"),
        ],
    )  # fmt: skip
