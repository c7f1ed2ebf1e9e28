"""The Triton drop-in on the GPU: a real ``@triton.jit`` matmul takes its config from a triton export
written by the farm's writer, and falls back to Triton's own autotuning where the export has no file
for this device. The kernel stores the meta-parameters it was compiled with, so the test sees which
config ran, not only that the product is right."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from kernelfarm.core.exports import triton as triton_format
from kernelfarm.core.exports.model import BestEntry, BestExport
from kernelfarm.sdk.triton_autotune import autotune

pytestmark = pytest.mark.gpu


def matmul_kernel() -> Any:
    triton = pytest.importorskip("triton")
    import triton.language as tl  # a module, not a variable: its constexpr annotates the kernel's parameters

    @triton.jit
    def dropin_matmul(a_ptr, b_ptr, c_ptr, meta_ptr, M, N, K,
                      BLOCK_SIZE_M: tl.constexpr, BLOCK_SIZE_N: tl.constexpr, BLOCK_SIZE_K: tl.constexpr):  # fmt: skip
        pid_m, pid_n = tl.program_id(0), tl.program_id(1)
        rm = pid_m * BLOCK_SIZE_M + tl.arange(0, BLOCK_SIZE_M)
        rn = pid_n * BLOCK_SIZE_N + tl.arange(0, BLOCK_SIZE_N)
        rk = tl.arange(0, BLOCK_SIZE_K)
        acc = tl.zeros((BLOCK_SIZE_M, BLOCK_SIZE_N), dtype=tl.float32)
        for k in range(0, K, BLOCK_SIZE_K):
            a = tl.load(
                a_ptr + rm[:, None] * K + (k + rk)[None, :], mask=(rm[:, None] < M) & ((k + rk)[None, :] < K), other=0.0
            )
            b = tl.load(
                b_ptr + (k + rk)[:, None] * N + rn[None, :], mask=((k + rk)[:, None] < K) & (rn[None, :] < N), other=0.0
            )
            acc += tl.dot(a, b, input_precision="ieee")
        tl.store(c_ptr + rm[:, None] * N + rn[None, :], acc, mask=(rm[:, None] < M) & (rn[None, :] < N))
        if (pid_m == 0) & (pid_n == 0):
            tl.store(meta_ptr + 0, BLOCK_SIZE_M)
            tl.store(meta_ptr + 1, BLOCK_SIZE_N)
            tl.store(meta_ptr + 2, BLOCK_SIZE_K)

    return dropin_matmul


def export_for(device_name: str) -> BestExport:
    def entry(size: int, m: int, n: int, k: int, warps: int, stages: int) -> BestEntry:
        problem = {"M": size, "N": size, "K": size}
        config = {"block_size_m": m, "block_size_n": n, "block_size_k": k, "num_warps": warps, "num_stages": stages}
        key = f"M={size},N={size},K={size}"
        return BestEntry(
            gpu_model="this-gpu",
            gpu_name=device_name,
            problem=problem,
            problem_key=key,
            config=config,
            config_key=",".join(map(str, config.values())),
            time_ms=1.0,
            trial_id=1,
            job_id="00000000-0000-0000-0000-000000000001",
        )

    return BestExport(
        kernel="dropin_matmul", kernel_version=1, source_hash="0" * 64,
        parameters=["block_size_m", "block_size_n", "block_size_k", "num_warps", "num_stages"],
        problem_params=["M", "N", "K"], generated_at=datetime.now(UTC),
        entries=[entry(512, 64, 32, 32, 4, 3), entry(256, 32, 64, 16, 2, 2)],
    )  # fmt: skip


def run(kernel: Any, size: int) -> tuple[Any, list[int]]:
    import torch

    a = torch.randn(size, size, device="cuda", dtype=torch.float32)
    b = torch.randn(size, size, device="cuda", dtype=torch.float32)
    c = torch.full((size, size), float("nan"), device="cuda", dtype=torch.float32)  # poisoned
    meta = torch.zeros(3, device="cuda", dtype=torch.int32)

    def grid(m: dict[str, Any]) -> tuple[int, int]:
        return (
            (size + m["BLOCK_SIZE_M"] - 1) // m["BLOCK_SIZE_M"],
            (size + m["BLOCK_SIZE_N"] - 1) // m["BLOCK_SIZE_N"],
        )

    kernel[grid](a, b, c, meta, size, size, size)
    torch.cuda.synchronize()
    torch.testing.assert_close(c, a @ b, rtol=1e-4, atol=1e-3)
    return c, meta.tolist()


def test_the_dropin_runs_the_exported_config_of_this_device(tmp_path: Path) -> None:
    torch = pytest.importorskip("torch")
    triton = pytest.importorskip("triton")
    name = torch.cuda.get_device_name()
    for file_name, text in triton_format.write(export_for(name)).items():
        (tmp_path / file_name).write_text(text)
    configs = [triton.Config({"BLOCK_SIZE_M": 16, "BLOCK_SIZE_N": 16, "BLOCK_SIZE_K": 16}, num_warps=1)]
    kernel = autotune(configs=configs, key=["M", "N", "K"], kernel="dropin_matmul", export=tmp_path, device_name=name)(
        matmul_kernel()
    )
    assert run(kernel, 512)[1] == [64, 32, 32]
    assert run(kernel, 256)[1] == [32, 64, 16]
    assert {k: (c.source, c.shape_key) for k, c in kernel.choices.items()} == {
        (512, 512, 512): ("export", "M=512,N=512,K=512"),
        (256, 256, 256): ("export", "M=256,N=256,K=256"),
    }
    assert kernel._fallback is None  # Triton's autotuner was never built


def test_no_export_for_this_device_falls_back_to_tritons_autotune(tmp_path: Path) -> None:
    triton = pytest.importorskip("triton")
    configs = [
        triton.Config({"BLOCK_SIZE_M": 32, "BLOCK_SIZE_N": 32, "BLOCK_SIZE_K": 16}, num_warps=2),
        triton.Config({"BLOCK_SIZE_M": 64, "BLOCK_SIZE_N": 64, "BLOCK_SIZE_K": 32}, num_warps=4),
    ]
    # The folder holds no file for this device: the real triton.autotune tunes over `configs`.
    kernel = autotune(configs=configs, key=["M", "N", "K"], kernel="dropin_matmul", export=tmp_path,
                      device_name="NVIDIA Nonexistent GPU")(matmul_kernel())  # fmt: skip
    meta = run(kernel, 256)[1]
    assert kernel.choices[(256, 256, 256)].source == "autotune"
    best = kernel.fallback().best_config
    assert meta == [best.kwargs["BLOCK_SIZE_M"], best.kwargs["BLOCK_SIZE_N"], best.kwargs["BLOCK_SIZE_K"]]
