"""CPU checks of the CUDA kernel catalogue: specs validate, spaces are rich, launches are sane."""

from __future__ import annotations

from typing import Any

import pytest

from kernelfarm.kernels.cuda_kernel import CudaKernel
from kernelfarm.kernels.faultinject.kernel import SPEC as FAULT_SPEC
from kernelfarm.kernels.registry import all_kernels, validate

CUDA_KERNELS: dict[str, list[dict[str, Any]]] = {
    "layernorm": [
        {"M": 8192, "N": 4096, "dtype": "float32"},
        {"M": 8192, "N": 4096, "dtype": "bfloat16"},
        {"M": 16384, "N": 8192, "dtype": "bfloat16"},
    ],
    "softmax": [{"M": 8192, "N": 4096, "dtype": "float32"}, {"M": 4096, "N": 8192, "dtype": "bfloat16"}],
    "matmul_fp32": [{"M": 4096, "N": 4096, "K": 4096}, {"M": 2048, "N": 2048, "K": 2048}],
    "matmul_bf16": [{"M": 4096, "N": 4096, "K": 4096}, {"M": 8192, "N": 8192, "K": 8192}],
    "matmul_bf16_wgmma": [{"M": 4096, "N": 4096, "K": 4096}],
    "flash_attention": [{"B": 4, "H": 16, "S": 4096, "D": 64, "causal": 1}],
    "conv2d": [
        {"N": 32, "H": 28, "W": 28, "C": 256, "K": 256, "R": 3},
        {"N": 32, "H": 56, "W": 56, "C": 64, "K": 64, "R": 3},
    ],
    "image_convolution": [{"H": 4096, "W": 4096, "F": 15}, {"H": 2048, "W": 2048, "F": 5}],
}
# Fewer than 300 valid configs: flash-attention's space is bounded by registers and shared memory.
MIN_SPACE = {"flash_attention": 100}


def test_cuda_kernels_are_registered() -> None:
    registry = all_kernels()
    for name in CUDA_KERNELS:
        spec = registry[name]
        assert spec.backends == frozenset({"cuda"})
        assert isinstance(spec.cuda, CudaKernel)
        assert spec.cuda.entry.startswith("kf_")  # the profiler selects kernels by this prefix
        assert spec.cuda.entry in spec.source_text


def test_fault_kernel_is_valid_but_not_registered() -> None:
    validate(FAULT_SPEC)
    assert "faultinject" not in all_kernels()


@pytest.mark.parametrize("name,problem", [(n, p) for n, ps in CUDA_KERNELS.items() for p in ps])
def test_spaces_are_rich_and_launches_sane(name: str, problem: dict) -> None:
    spec = all_kernels()[name]
    problem = spec.normalize_problem(problem)
    configs = spec.space.valid_configs(problem)
    assert MIN_SPACE.get(name, 300) <= len(configs) <= 20_000, len(configs)
    assert spec.cuda is not None
    for config in configs[:: max(1, len(configs) // 50)]:
        launch = spec.cuda.launch(config, problem)
        assert 32 <= launch.threads <= 1024
        assert all(g >= 1 for g in launch.grid)
        defines = spec.cuda.defines(config, problem)
        assert all(isinstance(v, int | str) for v in defines.values())
    assert spec.cuda.flops(problem) > 0 and spec.cuda.bytes_moved(problem) > 0


def test_matmul_tiles_cover_the_problem() -> None:
    spec = all_kernels()["matmul_fp32"]
    problem = {"M": 4096, "N": 2048, "K": 1024}
    assert spec.cuda is not None
    for raw in spec.space.valid_configs(problem)[::37]:
        config = {k: int(v) for k, v in raw.items()}
        launch = spec.cuda.launch(config, problem)
        assert launch.grid[0] * config["BM"] * config["BN"] == 4096 * 2048
        threads = launch.threads
        assert (config["BM"] * config["BK"] // 4) % threads == 0
