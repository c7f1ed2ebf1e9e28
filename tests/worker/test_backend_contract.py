"""The contract every backend keeps (worker/backends/base.py), run over every backend: replay, the
CPU fake, cuda and triton (marked gpu: they run on the device machine and skip where CuPy or Triton is
missing).

A case is a backend with requests it must measure: valid ones, and invalid ones of each kind (a value
outside the space, a missing parameter, an unknown kernel). Adding a backend = adding its case here.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest

from kernelfarm.core.gpu import model_slug
from kernelfarm.core.landscape import load_landscape
from kernelfarm.core.measurement import Measurement
from kernelfarm.core.objectives import ENERGY_MISSING
from kernelfarm.core.states import FailureKind
from kernelfarm.worker.backend_factory import BACKEND_NAMES
from kernelfarm.worker.backends.base import Backend, KeepAlive, MeasureRequest, ProfileOutcome


@dataclass(frozen=True)
class Case:
    make: Callable[[], Backend]  # a new backend of this kind
    valid: tuple[MeasureRequest, ...]  # at least two configs it measures verified
    invalid: tuple[MeasureRequest, ...]  # each must come back as a CONSTRAINT failure


def _requests(kernel: str, problem: dict[str, Any], configs: list[dict[str, Any]], seed: int = 1) -> tuple[
    tuple[MeasureRequest, ...], tuple[MeasureRequest, ...]
]:  # fmt: skip
    valid = tuple(MeasureRequest(kernel, problem, c, profile=False, seed=seed) for c in configs)
    base = dict(configs[0])
    name = next(iter(base))
    outside = base | {name: -12345}  # a value no parameter lists
    missing = {k: v for k, v in base.items() if k != name}
    invalid = (
        MeasureRequest(kernel, problem, outside, profile=False, seed=seed),
        MeasureRequest(kernel, problem, missing, profile=False, seed=seed),
        MeasureRequest("no_such_kernel", problem, base, profile=False, seed=seed),
    )
    return valid, invalid


def replay_case(tmp: Path) -> Case:
    from kernelfarm.kernels.recorded import RECORDED_DIR
    from kernelfarm.worker.backends.replay import ReplayBackend, recorded_problem

    path = RECORDED_DIR / "convolution_RTX_3090.json.gz"
    landscape = load_landscape(path)
    keys = landscape.valid_keys[:3]
    configs = [
        {p.name: next(v for v in p.values if str(v) == part) for p, part in zip(landscape.space.parameters,
                                                                                key.split(","), strict=True)}
        for key in keys
    ]  # fmt: skip
    valid, invalid = _requests(landscape.kernel_name, recorded_problem(landscape), configs)
    return Case(lambda: ReplayBackend([path]), valid, invalid)


def fake_case(tmp: Path) -> Case:
    from kernelfarm.kernels.registry import get_kernel
    from kernelfarm.worker.backends.fake import FakeBackend

    spec = get_kernel("softmax")
    problem = spec.normalize_problem(spec.default_problem)
    valid, invalid = _requests("softmax", problem, spec.space.valid_configs(problem)[:3])
    return Case(FakeBackend, valid, invalid)


def cuda_case(tmp: Path) -> Case:
    pytest.importorskip("cupy", reason="CuPy is not installed (GPU tests run on the device machine)")
    from kernelfarm.kernels.faultinject.kernel import MODES, REF, SPEC
    from kernelfarm.worker.backends.cuda import CudaBackend, CudaBackendOptions
    from kernelfarm.worker.measuring.timing import TimingPolicy

    options = CudaBackendOptions(cache_dir=tmp, timeout_s=20.0, policy=TimingPolicy(max_time_s=0.3))
    configs = [{"MODE": MODES["ok"]}, {"MODE": MODES["ok"]}]
    valid, invalid = _requests("faultinject", {"n": 1 << 20}, configs)
    valid = (valid[0], MeasureRequest("faultinject", {"n": 1 << 20}, configs[1], profile=False, seed=2))
    return Case(lambda: CudaBackend(options, specs={"faultinject": SPEC}, spec_refs={"faultinject": REF}), valid,
                invalid)  # fmt: skip


def triton_case(tmp: Path) -> Case:
    pytest.importorskip("cupy", reason="CuPy is not installed (GPU tests run on the device machine)")
    pytest.importorskip("triton", reason="Triton is not installed (GPU tests run on the device machine)")
    from kernelfarm.kernels.registry import get_kernel
    from kernelfarm.worker.backends.triton import TritonBackend, TritonBackendOptions
    from kernelfarm.worker.measuring.timing import TimingPolicy

    spec = get_kernel("softmax_triton")
    problem = spec.normalize_problem({"M": 1000, "N": 1000, "dtype": "float32"})
    configs = spec.space.valid_configs(problem)
    valid, invalid = _requests("softmax_triton", problem, [configs[0], configs[-1]])
    options = TritonBackendOptions(
        cache_dir=tmp, timeout_s=60.0, policy=TimingPolicy(max_time_s=0.3), compile_workers=4
    )
    return Case(lambda: TritonBackend(options), valid, invalid)


CASES = {"replay": replay_case, "fake": fake_case, "cuda": cuda_case, "triton": triton_case}
NEEDS_A_GPU = frozenset({"cuda", "triton"})
# Every case runs through every test below; adding a backend = adding its case above.
BACKENDS = [pytest.param(name, marks=pytest.mark.gpu) if name in NEEDS_A_GPU else name for name in CASES]


@pytest.fixture(scope="module", params=BACKENDS)
def case(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Case:
    return CASES[request.param](tmp_path_factory.mktemp(request.param))


@pytest.fixture(scope="module")
def backend(case: Case) -> Iterator[Backend]:
    b = case.make()
    yield b
    b.close()


def assert_constraint_failure(m: Measurement, backend: Backend) -> None:
    assert m.failure == FailureKind.CONSTRAINT, (m.failure, m.failure_message)
    assert m.failure_message and m.timing is None and not m.verified
    assert m.provenance.get("backend") == backend.name


def assert_verified(m: Measurement, backend: Backend) -> None:
    assert m.failure is None, m.failure_message
    assert m.verified and m.timing is not None and m.timing.times_ms
    assert m.timing.p20_ms <= m.timing.median_ms <= m.timing.p80_ms and m.timing.median_ms > 0
    assert m.provenance.get("backend") == backend.name


def test_every_backend_of_the_factory_has_a_contract_case() -> None:
    assert set(CASES) == set(BACKEND_NAMES)


def test_identity_fields(backend: Backend) -> None:
    assert isinstance(backend.name, str) and backend.name in BACKEND_NAMES
    identity = backend.identity()
    assert identity.gpu_name and identity.gpu_model == model_slug(identity.gpu_name)
    for value in (identity.gpu_uuid, identity.compute_capability, identity.driver_version, identity.cuda_version):
        assert value is None or (isinstance(value, str) and value)


def test_a_valid_config_measures_verified_with_timing_and_provenance(case: Case, backend: Backend) -> None:
    assert_verified(backend.measure(case.valid[0]), backend)
    assert_verified(backend.measure(case.valid[1], keep_alive=lambda: True), backend)


def test_a_request_for_energy_gets_a_reading_or_the_reason_there_is_none(case: Case, backend: Backend) -> None:
    """A job that ranks by energy learns from every verified trial either its energy or why it has none
    (core/objectives.py ENERGY_MISSING); a time job's trial is never metered."""
    metered = backend.measure(replace(case.valid[0], energy=True))
    assert_verified(metered, backend)
    reading, missing = "energy_mj" in metered.metrics, ENERGY_MISSING in metered.metrics
    assert reading != missing, metered.metrics
    assert not missing or metered.metrics[ENERGY_MISSING]
    plain = backend.measure(case.valid[1])
    assert "energy_mj" not in plain.metrics and ENERGY_MISSING not in plain.metrics


@pytest.mark.parametrize("which", ["value outside the space", "missing parameter", "unknown kernel"])
def test_an_invalid_request_is_a_typed_failure_never_raised(case: Case, backend: Backend, which: str) -> None:
    request = case.invalid[["value outside the space", "missing parameter", "unknown kernel"].index(which)]
    assert_constraint_failure(backend.measure(request), backend)


def test_measure_stream_yields_one_result_per_request_in_order_pulling_lazily(case: Case, backend: Backend) -> None:
    requests = [case.valid[0], case.invalid[0], case.valid[1], case.invalid[2], case.valid[0]]
    pulled: list[int] = []

    def pairs() -> Iterator[tuple[MeasureRequest, KeepAlive]]:
        for i, request in enumerate(requests):
            pulled.append(i)
            yield request, None

    stream = backend.measure_stream(pairs())
    first = next(stream)
    assert len(pulled) <= 2  # at most the next one is pulled while the first is measured
    results = [first, *stream]
    assert len(results) == len(requests) and len(pulled) == len(requests)
    for request, m in zip(requests, results, strict=True):
        if request in case.valid:
            assert_verified(m, backend)
        else:
            assert_constraint_failure(m, backend)
    assert list(backend.measure_stream(iter([]))) == []


def test_profile_returns_one_outcome_per_request(case: Case, backend: Backend) -> None:
    outcomes = backend.profile([case.valid[0], case.invalid[0], case.invalid[2]])
    assert len(outcomes) == 3 and all(isinstance(o, ProfileOutcome) for o in outcomes)
    assert (outcomes[0].metrics is None) != (outcomes[0].error is None)  # metrics, or why there are none
    for outcome in outcomes[1:]:
        assert outcome.metrics is None and outcome.error
    assert backend.profile([]) == []


def test_prepared_requests_become_ready_and_invalid_ones_are_ready_at_once(case: Case, backend: Backend) -> None:
    for request in case.invalid:
        assert backend.ready(request)
    backend.prepare([*case.valid, *case.invalid])
    deadline = time.monotonic() + 120
    while not all(backend.ready(r) for r in case.valid):
        assert time.monotonic() < deadline, "prepared requests never became ready"
        time.sleep(0.05)
    assert_verified(backend.measure(case.valid[0]), backend)


def test_warm_up_may_run_twice_and_measuring_still_works(case: Case, backend: Backend) -> None:
    backend.warm_up()
    backend.warm_up()
    assert_verified(backend.measure(case.valid[1]), backend)


def test_a_fresh_backend_closes_without_measuring(case: Case) -> None:
    # close() is the one hook every worker calls on the way out, also for a backend that never measured.
    fresh = case.make()
    assert fresh.identity().gpu_model
    fresh.close()
