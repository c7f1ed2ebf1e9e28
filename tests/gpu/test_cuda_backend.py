"""The real pipeline on a GPU: faults become typed failures and the next trial succeeds; real
kernels verify, time, carry roofline and provenance; ncu profiles a batch."""

from __future__ import annotations

from typing import Any

import pytest

from kernelfarm.core.states import FailureKind
from kernelfarm.kernels.faultinject.kernel import MODES
from kernelfarm.worker.backends.base import MeasureRequest

pytestmark = pytest.mark.gpu


def fault(mode: str, seed: int = 1) -> MeasureRequest:
    return MeasureRequest("faultinject", {"n": 1 << 20}, {"MODE": MODES[mode]}, profile=False, seed=seed)


def test_identity(backend: Any) -> None:
    ident = backend.identity()
    assert ident.gpu_uuid and ident.compute_capability and ident.driver_version
    assert ident.gpu_model == ident.gpu_name.lower().replace(" ", "-") or ident.gpu_model


def test_identity_carries_the_gpus_memory_as_nvml_reports_it(backend: Any) -> None:
    """What the worker registers, and so what the API's problem-size limit for the model comes from."""
    import pynvml

    pynvml.nvmlInit()
    try:
        device = pynvml.nvmlDeviceGetHandleByUUID(backend.identity().gpu_uuid)
        total = pynvml.nvmlDeviceGetMemoryInfo(device).total
    finally:
        pynvml.nvmlShutdown()
    assert backend.identity().memory_bytes == total > 1 << 30


def test_out_of_device_memory_is_a_constraint_and_the_next_trial_succeeds(backend: Any) -> None:
    """A problem whose declared footprint fits passes the worker's check before compiling; its inputs then
    do not fit (kernels/faultinject/memory_hog.py). The measuring child says so instead of crashing, and
    the GPU is usable for the next trial."""
    hog = MeasureRequest("memory_hog", {"n": 1 << 20}, {"MODE": MODES["ok"]}, profile=False, seed=1)
    failed = backend.measure(hog)
    assert failed.failure == FailureKind.CONSTRAINT, failed.failure_message
    assert "out of device memory" in failed.failure_message
    assert "its declared footprint is" in failed.failure_message and " free of " in failed.failure_message
    assert "Traceback" not in failed.failure_message
    ok = backend.measure(fault("ok", seed=3))
    assert ok.failure is None, ok.failure_message
    assert ok.verified


def test_a_problem_larger_than_the_gpu_is_refused_before_compiling(backend: Any) -> None:
    """The staging check: matmul_fp32 at M=N=K=2^17 declares 2 x 256 GiB, more than any GPU here; it is
    refused with the worker's words, not compiled or allocated."""
    from kernelfarm.kernels.registry import get_kernel

    spec = get_kernel("matmul_fp32")
    problem = {"M": 1 << 17, "N": 1 << 17, "K": 1 << 17}
    assert spec.device_bytes(problem) > backend.identity().memory_bytes
    config = spec.space.valid_configs(problem)[0]
    m = backend.measure(MeasureRequest("matmul_fp32", problem, config, profile=False, seed=1))
    assert m.failure == FailureKind.CONSTRAINT, m.failure_message
    assert "of this worker's GPU" in m.failure_message


@pytest.mark.parametrize(
    "mode,kind",
    [
        ("compile", FailureKind.COMPILE),
        ("launch", FailureKind.LAUNCH),
        ("crash", FailureKind.CRASH),
        ("timeout", FailureKind.TIMEOUT),
        ("wrong_result", FailureKind.WRONG_RESULT),
    ],
)
def test_fault_is_typed_and_next_trial_succeeds(backend: Any, mode: str, kind: FailureKind) -> None:
    if mode == "timeout":
        backend.options = type(backend.options)(**{**backend.options.__dict__, "timeout_s": 5.0})
    try:
        failed = backend.measure(fault(mode))
    finally:
        backend.options = type(backend.options)(**{**backend.options.__dict__, "timeout_s": 20.0})
    assert failed.failure == kind, failed.failure_message
    assert failed.failure_message
    assert failed.provenance["gpu_uuid"]
    ok = backend.measure(fault("ok", seed=2))
    assert ok.failure is None, ok.failure_message
    assert ok.verified and ok.timing is not None and len(ok.timing.times_ms) >= 10


def test_constraint_violation_is_typed(backend: Any) -> None:
    m = backend.measure(
        MeasureRequest(
            "layernorm",
            {"M": 64, "N": 4096, "dtype": "float32"},
            {"THREADS": 32, "ROWS": 2, "VEC": 4, "KEEP": 0, "LOAD_CS": 0, "STORE_CS": 0},
            profile=False,
            seed=1,
        )
    )
    assert m.failure == FailureKind.CONSTRAINT


@pytest.mark.parametrize(
    "kernel,problem",
    [
        ("layernorm", {"M": 1000, "N": 4096, "dtype": "float32"}),
        ("layernorm", {"M": 1000, "N": 4096, "dtype": "bfloat16"}),
        ("softmax", {"M": 1000, "N": 2048, "dtype": "float32"}),
        ("softmax", {"M": 1000, "N": 2048, "dtype": "bfloat16"}),
        ("matmul_fp32", {"M": 512, "N": 256, "K": 384}),
        ("matmul_bf16", {"M": 512, "N": 512, "K": 1024}),
        ("matmul_bf16_wgmma", {"M": 512, "N": 512, "K": 1024}),
        ("flash_attention", {"B": 1, "H": 2, "S": 256, "D": 64, "causal": 1}),
        ("flash_attention", {"B": 1, "H": 2, "S": 512, "D": 128, "causal": 0}),
        ("conv2d", {"N": 2, "H": 8, "W": 8, "C": 64, "K": 64, "R": 3}),
        ("image_convolution", {"H": 256, "W": 512, "F": 7}),
        ("image_convolution", {"H": 512, "W": 1024, "F": 15}),
    ],
)
def test_real_kernels_verify_across_the_space(backend: Any, kernel: str, problem: dict) -> None:
    from kernelfarm.kernels.registry import get_kernel

    spec = get_kernel(kernel)
    configs = spec.space.valid_configs(problem)
    step = max(1, len(configs) // 6)
    requests = [MeasureRequest(kernel, problem, c, profile=False, seed=7) for c in configs[::step][:6]]
    for m in backend.measure_many(requests):
        assert m.failure is None, m.failure_message
        assert m.verified and m.timing is not None
        assert m.metrics["bound"] in {"memory", "compute"}
        assert m.metrics["achieved_bytes_per_s"] > 0
        for key in (
            "gpu_uuid",
            "compute_capability",
            "driver_version",
            "nvrtc_version",
            "compile_options",
            "source_hash",
            "clocks_before",
        ):
            assert m.provenance.get(key), key


def test_profile_batch_collects_metrics(backend: Any) -> None:
    problem = {"M": 2048, "N": 4096, "dtype": "float32"}
    from kernelfarm.kernels.registry import get_kernel

    configs = get_kernel("softmax").space.valid_configs(problem)[:3]
    requests = [MeasureRequest("softmax", problem, c, profile=True, seed=3) for c in configs]
    for m in backend.measure_many(requests):
        assert m.verified, m.failure_message
        assert "profile_error" not in m.metrics, m.metrics.get("profile_error")
        for key in (
            "ncu_duration_ns",
            "achieved_occupancy_pct",
            "dram_throughput_pct",
            "l2_hit_rate_pct",
            "registers_per_thread",
            "static_shared_mem_per_block",
            "ncu_wall_s",
        ):
            assert m.metrics.get(key) is not None, key
        # ncu's duration agrees with the event timing within a generous margin
        assert m.timing is not None
        assert 0.3 < m.metrics["ncu_duration_ns"] * 1e-6 / m.timing.median_ms < 3.0


@pytest.mark.parametrize("mode,kind", [("crash", FailureKind.CRASH), ("compile", FailureKind.COMPILE)])
def test_a_fault_in_a_pipelined_stream_fails_only_its_request(backend: Any, mode: str, kind: FailureKind) -> None:
    # The request after a crash was queued on the child that died: it is sent again to a fresh one.
    requests = [fault("ok", seed=11), fault(mode, seed=12), fault("ok", seed=13), fault("ok", seed=14)]
    results = list(backend.measure_stream((r, None) for r in requests))
    assert [m.failure for m in results] == [None, kind, None, None], [m.failure_message for m in results]
    for m in results[2:]:
        assert m.verified and m.timing is not None
        # Every measurement carries its time split: the child's own time covers the GPU part.
        assert 0 < m.metrics["gpu_s"] <= m.metrics["child_s"] <= m.metrics["measure_wall_s"] + 1e-3


def test_the_standby_ncu_profiles_a_batch_faster_than_a_fresh_one(backend: Any) -> None:
    import time
    from dataclasses import replace

    from kernelfarm.kernels.registry import get_kernel
    from kernelfarm.worker.backends.cuda import CudaBackend

    problem = {"M": 2048, "N": 4096, "dtype": "float32"}
    configs = get_kernel("softmax").space.valid_configs(problem)[3:6]
    requests = [MeasureRequest("softmax", problem, c, profile=False, seed=5) for c in configs]
    assert all(m.verified for m in backend.measure_many(requests))
    backend.warm_up()  # a worker's start: the standby is started here
    deadline = time.monotonic() + 60  # a worker measures for longer than this before its first batch
    while not backend.profiler_ready() and time.monotonic() < deadline:
        time.sleep(0.1)
    fresh_backend = CudaBackend(replace(backend.options, profile_standby=False))
    try:
        walls = {}
        for name, which in (("standby", backend), ("fresh", fresh_backend)):
            started = time.perf_counter()
            outcomes = which.profile(requests)
            walls[name] = time.perf_counter() - started
            for outcome in outcomes:
                assert outcome.error is None and outcome.metrics is not None, outcome.error
                assert outcome.metrics["ncu_duration_ns"] > 0 and outcome.metrics["ncu_batch_size"] == 3
                assert outcome.metrics["ncu_standby"] is (name == "standby")
    finally:
        fresh_backend.close()
    print(f"ncu batch of 3: standby {walls['standby']:.2f} s, fresh {walls['fresh']:.2f} s")
    assert walls["standby"] < walls["fresh"]


def test_warm_up_readies_the_child_the_ceilings_and_the_compile_pool(backend: Any) -> None:
    backend.warm_up()
    assert backend.ceilings() is not None
    # Every pool process ran its initializer, including the NVRTC warm-up compile.
    assert backend.compile_pool.wait_started(0.0)
    first = backend.measure(fault("ok", seed=21))
    assert first.verified and first.metrics["child_s"] < 2.0  # no interpreter, context or library start
