"""The triton backend on a real GPU, beyond the contracts: every matmul schedule verifies at a ragged
shape, and Nsight Compute profiles a Triton kernel by its name (marked gpu: the device machine)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from kernelfarm.worker.backends.base import MeasureRequest
from tests.gpu.availability import gpu_missing

if TYPE_CHECKING:  # imported by the fixture: Triton may be missing
    from kernelfarm.worker.backends.triton import TritonBackend

pytestmark = pytest.mark.gpu

PROBLEM = {"M": 1000, "N": 1000, "K": 776, "dtype": "bfloat16", "b_layout": "nk"}
TILED = {
    "BLOCK_M": 128,
    "BLOCK_N": 128,
    "BLOCK_K": 64,
    "GROUP_M": 8,
    "num_warps": 8,
    "num_stages": 3,
    "TMA": 0,
    "SUBTILE": 0,
}


@pytest.fixture(scope="module")
def backend(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TritonBackend]:
    reason = gpu_missing()
    if reason is not None:
        pytest.skip(reason)
    pytest.importorskip("triton", reason="Triton is not installed")
    from kernelfarm.worker.backends.triton import TritonBackend, TritonBackendOptions
    from kernelfarm.worker.measuring.timing import TimingPolicy

    cache: Path = tmp_path_factory.mktemp("triton")
    options = TritonBackendOptions(cache_dir=cache, policy=TimingPolicy(max_time_s=0.3), compile_workers=4,
                                   roofline=False, profile_standby=False)  # fmt: skip
    b = TritonBackend(options)
    yield b
    b.close()


def test_every_schedule_verifies_at_a_ragged_shape_and_report_their_resources(backend: TritonBackend) -> None:
    schedules = [{"TMA": 0}, {"TMA": 1}, {"TMA": 1, "SUBTILE": 1}]  # tiled, TMA, TMA storing half tiles
    requests = [MeasureRequest("matmul_triton", PROBLEM, TILED | s, profile=False, seed=3) for s in schedules]
    for request, m in zip(requests, backend.measure_many(requests), strict=True):
        assert m.verified and m.failure is None, m.failure_message
        assert m.metrics["registers"] > 0 and m.metrics["triton_wgmma_instructions"] > 0  # Hopper's wgmma
        assert m.provenance["triton_function"] == ("kf_triton_matmul_tma" if request.config["TMA"] else
                                                   "kf_triton_matmul")  # fmt: skip


def test_ncu_profiles_the_triton_kernel_by_its_name(backend: TritonBackend) -> None:
    request = MeasureRequest("matmul_triton", PROBLEM, TILED, profile=True, seed=3)
    (m,) = backend.measure_many([request])
    assert m.verified, m.failure_message
    assert "profile_error" not in m.metrics, m.metrics.get("profile_error")
    assert m.metrics["kernel_name"] == "kf_triton_matmul" and m.metrics["ncu_duration_ns"] > 0
