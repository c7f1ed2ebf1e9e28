"""The GPU backends' shared composition (worker/backends/gpu.py) on the CPU: the cuda and triton backends
built as a worker builds them, with only the GPU faked (NVML's device, the toolchain versions), up to the
point where a request would reach the GPU. The GPU side is in tests/worker/test_backend_contract.py."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from kernelfarm.core.gpu import model_slug
from kernelfarm.core.measurement import Measurement
from kernelfarm.core.states import FailureKind
from kernelfarm.kernels.registry import all_kernels
from kernelfarm.worker.backends import cuda, triton
from kernelfarm.worker.backends.base import MeasureRequest
from kernelfarm.worker.backends.gpu import GpuBackend, GpuBackendOptions
from kernelfarm.worker.cuda import device as nvml

H100 = nvml.NvmlDevice(0, "NVIDIA H100 80GB HBM3", "GPU-1234", "9.0", "580.65", "13.0", 80 << 30, 1980, 2619)


@pytest.fixture(params=["cuda", "triton"])
def backend(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[GpuBackend]:
    monkeypatch.setattr(nvml, "query_device", lambda ordinal: H100)
    monkeypatch.setattr(cuda, "nvrtc_version", lambda: "13.0")
    monkeypatch.setattr(triton, "triton_version", lambda: "3.6.0")
    kind = cuda.CudaBackend if request.param == "cuda" else triton.TritonBackend
    made = kind(GpuBackendOptions(cache_dir=tmp_path, compile_workers=1))
    yield made
    made._staging.pool.wait_started(60)  # a process still starting when the pool closes prints a traceback
    made.close()


def test_identity_names_the_backends_own_compiler(backend: GpuBackend) -> None:
    identity = backend.identity()
    assert identity.gpu_model == model_slug(H100.name) and identity.gpu_uuid == "GPU-1234"
    extra = dict(identity.extra or {})
    if backend.name == "cuda":
        assert extra["nvrtc_version"] == "13.0" and "triton_version" not in extra
    else:
        assert extra["triton_version"] == "3.6.0" and "nvrtc_version" not in extra


def test_a_request_it_cannot_measure_is_a_constraint_failure_before_any_compile(backend: GpuBackend) -> None:
    other = "softmax_triton" if backend.name == "cuda" else "softmax"
    for kernel, reason in (("no_such_kernel", "no_such_kernel"), (other, "has no")):
        request = MeasureRequest(kernel, {}, {}, profile=False, seed=1)
        assert backend.ready(request)
        staged = backend.stage(request)
        assert isinstance(staged, Measurement) and staged.failure == FailureKind.CONSTRAINT
        assert reason in (staged.failure_message or "") and staged.provenance["backend"] == backend.name


def test_ncu_filters_on_this_backends_kernels_only(backend: GpuBackend) -> None:
    names = backend.entry_names(list(all_kernels().values()))
    mine, theirs = (
        ("kf_softmax", "kf_triton_softmax") if backend.name == "cuda" else ("kf_triton_softmax", "kf_softmax")
    )
    assert mine in names and theirs not in names


def test_each_backend_keeps_its_cache_and_pool_start_deadline(backend: GpuBackend, tmp_path: Path) -> None:
    assert backend.cache_dir == tmp_path
    assert type(backend).default_cache_dir().name == f"kernelfarm-{backend.name}"
    assert backend.pool_start_timeout_s == (60.0 if backend.name == "cuda" else 120.0)


def test_a_problem_larger_than_the_gpus_memory_is_a_constraint_failure_before_any_compile(backend: GpuBackend) -> None:
    kernel = "matmul_fp32" if backend.name == "cuda" else "matmul_triton"
    spec = backend.spec(kernel)
    big = spec.normalize_problem({"M": 131072, "N": 131072, "K": 131072})  # 64 GiB a matrix in fp32
    config = spec.space.valid_configs(big)[0]
    request = MeasureRequest(kernel, big, config, profile=False, seed=1)
    assert backend.ready(request)  # nothing to compile: it fails at once
    staged = backend.stage(request)
    assert isinstance(staged, Measurement) and staged.failure == FailureKind.CONSTRAINT
    assert "of device memory" in (staged.failure_message or "")
    assert "the 80.0 GiB of this worker's GPU" in (staged.failure_message or "")
    assert backend.identity().memory_bytes == H100.memory_bytes  # what the worker registers
    small = spec.normalize_problem({"M": 1024, "N": 1024, "K": 1024})
    assert backend._staging.invalid(MeasureRequest(kernel, small, spec.space.valid_configs(small)[0], False, 1)) is None
