"""The CPU fake backend beyond the contract: deterministic synthetic timings, every failure kind on
demand, and compile delays that make prepared requests ready later."""

from __future__ import annotations

import time

import pytest

from kernelfarm.core.settings import Settings
from kernelfarm.core.states import FailureKind
from kernelfarm.kernels.registry import get_kernel
from kernelfarm.worker.backend_factory import make_backend
from kernelfarm.worker.backends.base import MeasureRequest
from kernelfarm.worker.backends.fake import FakeBackend

SPEC = get_kernel("softmax")
PROBLEM = SPEC.normalize_problem(SPEC.default_problem)
CONFIGS = SPEC.space.valid_configs(PROBLEM)


def request(index: int, seed: int = 1) -> MeasureRequest:
    return MeasureRequest("softmax", PROBLEM, CONFIGS[index], profile=False, seed=seed)


def test_timings_are_deterministic_per_config_and_differ_between_configs() -> None:
    a, b = FakeBackend(), FakeBackend()
    first = a.measure(request(0)).timing
    assert first is not None and first == b.measure(request(0, seed=9)).timing
    medians = {m.timing.median_ms for m in (a.measure(request(i)) for i in range(8)) if m.timing is not None}
    assert len(medians) == 8 and all(0.1 <= t <= 10.0 for t in medians)


@pytest.mark.parametrize("kind", list(FailureKind))
def test_each_failure_kind_on_demand(kind: FailureKind) -> None:
    backend = FakeBackend(failures={SPEC.space.key(CONFIGS[1]): kind})
    failed = backend.measure(request(1))
    assert failed.failure == kind and failed.failure_message and not failed.verified
    assert failed.provenance["backend"] == "fake"
    assert backend.measure(request(2)).verified  # only the named config fails


def test_with_a_compile_delay_a_request_is_ready_only_after_it_was_prepared_and_compiled() -> None:
    backend = FakeBackend(compile_s=0.2)
    assert not backend.ready(request(0))
    backend.prepare([request(0)])
    assert not backend.ready(request(0))
    time.sleep(0.25)
    assert backend.ready(request(0)) and not backend.ready(request(1))


def test_the_factory_builds_it() -> None:
    backend = make_backend(Settings(worker_backend="fake"))
    assert isinstance(backend, FakeBackend) and backend.identity().gpu_model == "fake-gpu"
    with pytest.raises(ValueError, match="unknown worker backend"):
        make_backend(Settings(worker_backend="quantum"))


def test_with_a_pretended_memory_a_problem_that_cannot_fit_fails_saying_so() -> None:
    # softmax's default problem (8192 x 4096 fp32): two input sets of x, y and the reference, 768 MiB
    backend = FakeBackend(memory_bytes=512 << 20)
    failed = backend.measure(request(0))
    assert failed.failure == FailureKind.CONSTRAINT and not failed.verified
    assert "768.0 MiB" in (failed.failure_message or "") and "the 512.0 MiB of this worker's GPU" in (
        failed.failure_message or ""
    )
    assert backend.ready(request(0))  # nothing to wait for: it fails at once
    assert FakeBackend(memory_bytes=1 << 30).measure(request(0)).verified  # it fits in 1 GiB
    assert FakeBackend().measure(request(0)).verified  # no memory pretended: nothing refused


def test_the_factory_names_a_pretended_memory_in_the_gpu_model() -> None:
    backend = make_backend(Settings(worker_backend="fake", worker_fake_memory_bytes=1 << 30))
    identity = backend.identity()
    assert identity.memory_bytes == 1 << 30 and identity.gpu_model == "fake-gpu-1-0-gib"
    assert make_backend(Settings(worker_backend="fake")).identity().memory_bytes is None
