"""CPU checks of the CUDA kernel catalogue that are not part of every kernel's contract.

The per-kernel checks (spaces, problem signatures, launch shapes, defines, roofline figures,
source hashes, and on a GPU correctness) run over every kernel in test_kernel_contract.py.
"""

from __future__ import annotations

from pathlib import Path

from kernelfarm.kernels import registry
from kernelfarm.kernels.cuda_kernel import CudaKernel
from kernelfarm.kernels.faultinject.kernel import SPEC as FAULT_SPEC
from kernelfarm.kernels.registry import all_kernels, validate


def test_the_catalogue_ships_every_kernel_folder() -> None:
    # A kernel folder the registry skipped would drop out of the contract suite's parameters unnoticed.
    folders = {path.parent.name for path in Path(registry.__file__).parent.glob("*/spec.py")}
    shipped = {name for name, spec in all_kernels().items() if spec.backends & {"cuda", "triton"}}
    assert shipped == folders
    assert {"matmul_fp32", "flash_attention", "softmax", "matmul_triton"} <= shipped  # the folders were found at all


def test_fault_kernel_is_valid_but_not_registered() -> None:
    validate(FAULT_SPEC)
    assert "faultinject" not in all_kernels()


def test_matmul_tiles_cover_the_problem() -> None:
    spec = all_kernels()["matmul_fp32"]
    kernel = spec.impl("cuda", CudaKernel)
    problem = {"M": 4096, "N": 2048, "K": 1024}
    for raw in spec.space.valid_configs(problem)[::37]:
        config = {k: int(v) for k, v in raw.items()}
        launch = kernel.launch(config, problem)
        assert launch.grid[0] * config["BM"] * config["BN"] == 4096 * 2048
        threads = launch.threads
        assert (config["BM"] * config["BK"] // 4) % threads == 0
