"""From a job's objective to the measuring child's meter, on the CPU: the child meters a trial exactly
when its job's objective needs energy (core/objectives.py).

Real: the job row and its trial's request (worker/trial_request.py), the cuda backend's staging
(validity, the NVRTC compile job and its cubin cache, the child's message), the measuring child's
session (verify, the energy gate) and the reply's Measurement (worker/measuring/stream.py). Faked, behind
their own interfaces: NVRTC (tests/worker/test_compile_cache.py's module), compiled in-process instead of
in the pool's spawned processes (which cannot see a fake module); CuPy by NumPy and the kernel by a
loader whose launch is a Python function (tests/worker/test_session_second_seed.py); NVML's energy
counter by the simulated GPU of tests/worker/test_energy.py, which the launches run on."""

from __future__ import annotations

import secrets
import sys
import types
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from sqlalchemy import delete

from kernelfarm.core.db import session_scope
from kernelfarm.core.models import Job, Trial
from kernelfarm.core.objectives import ENERGY_MISSING
from kernelfarm.core.store import trials as trial_store
from kernelfarm.kernels.tolerance import Tolerance
from kernelfarm.worker.cuda import device as nvml
from kernelfarm.worker.cuda.compiler import CompileJob, CompileResult, compile_job
from kernelfarm.worker.cuda.provenance import CudaProvenance
from kernelfarm.worker.cuda.staging import CompileStaging
from kernelfarm.worker.measuring.catalogue import KernelCatalogue
from kernelfarm.worker.measuring.energy import ENERGY_METRICS
from kernelfarm.worker.measuring.loader import KernelLoader, LoadedKernel
from kernelfarm.worker.measuring.stream import Staged, measurement_from_reply
from kernelfarm.worker.measuring.timing import TimingPolicy
from kernelfarm.worker.trial_request import job_trial_request
from tests.conftest import store_job
from tests.worker.test_compile_cache import FakeNvrtc, nvrtc  # noqa: F401  (the fixture)
from tests.worker.test_energy import FakeGpu, _Event, meter_for
from tests.worker.test_session_second_seed import session_module  # noqa: F401  (the fixture)

H100 = nvml.NvmlDevice(0, "NVIDIA H100 80GB HBM3", "GPU-1234", "9.0", "580.65", "13.0", 80 << 30, 1980, 2619)
KERNEL = "matmul_fp32"


class InProcessPool:
    """The compile pool's interface (submit, done, result, forget) around the real ``compile_job``."""

    def __init__(self, cache_dir: Path) -> None:
        self.cache_dir = cache_dir

    def submit(self, job: CompileJob) -> Future[CompileResult]:
        future: Future[CompileResult] = Future()
        future.set_result(compile_job(job, str(self.cache_dir)))
        return future

    def done(self, job: CompileJob) -> bool:
        return True

    def result(self, job: CompileJob) -> CompileResult:
        return self.submit(job).result()

    def forget(self, job: CompileJob) -> None:
        pass


class Copy:
    """The kernel the child runs: y = x on fixed inputs (the message's problem is matmul's, unused)."""

    def make_inputs(self, problem: Mapping[str, Any], seed: int) -> dict[str, Any]:
        x = np.random.default_rng(seed).random(64).astype(np.float32)
        return {"x": x, "y": np.empty_like(x)}

    def outputs(self) -> tuple[str, ...]:
        return ("y",)

    def reference(self, buffers: Mapping[str, Any], problem: Mapping[str, Any]) -> dict[str, Any]:
        return {"y": buffers["x"].copy()}

    def tolerance(self, problem: Mapping[str, Any]) -> Tolerance:
        return Tolerance.derived(1e-6, "float32", 1)


class OnSimulatedGpu(KernelLoader):
    """Loads the staged cubin (it must be the one staging compiled); each launch runs on ``gpu``."""

    def __init__(self, gpu: FakeGpu) -> None:
        self.gpu = gpu

    def implementation(self, spec: Any) -> Copy:
        return Copy()

    def load(self, artifact: str, spec: Any, config: Mapping[str, Any], problem: Mapping[str, Any]) -> LoadedKernel:
        assert Path(artifact).read_bytes() == b"\x7fELF fake cubin"
        gpu = self.gpu

        class Loaded(LoadedKernel):
            resources: Mapping[str, int] = {}

            def bind(self, buffers: Mapping[str, Any], problem: Mapping[str, Any]) -> Callable[[], None]:
                def run() -> None:
                    gpu.launch()
                    buffers["y"][:] = buffers["x"]

                return run

        return Loaded()


class Catalogue(KernelCatalogue):
    def spec(self, name: str, version: int | None = None, bundle: str | None = None) -> Any:
        return types.SimpleNamespace(name=name)


class Steps:
    def roofline(self, request: Any, timing: Any) -> dict[str, Any]:
        return {}


@pytest.fixture
def gpu_model(database_url: str) -> Iterator[str]:
    model = f"test-link-{secrets.token_hex(4)}"  # no worker serves it
    yield model
    with session_scope(database_url) as session:
        session.execute(delete(Trial).where(Trial.gpu_model == model))
        session.execute(delete(Job).where(Job.gpu_model == model))


@pytest.mark.parametrize(
    ("objective", "counter_moves", "recorded"),
    [("time", True, set()), ("energy", True, {*ENERGY_METRICS, "energy_s"}),
     ("time+energy", True, {*ENERGY_METRICS, "energy_s"}), ("energy", False, {ENERGY_MISSING, "energy_s"})],
)  # fmt: skip
def test_the_child_meters_exactly_the_trials_of_jobs_that_rank_by_energy(
    database_url: str, gpu_model: str, objective: str, counter_moves: bool, recorded: set[str],
    nvrtc: FakeNvrtc, session_module: Any, tmp_path: Path,  # noqa: F811
) -> None:  # fmt: skip
    catalogue = KernelCatalogue()
    spec = catalogue.spec(KERNEL)
    config = spec.space.config_at(spec.space.valid_indices(spec.default_problem)[0])
    with session_scope(database_url) as session:
        job = store_job(session, KERNEL, gpu_model, objective=objective)
        [trial] = trial_store.add_trials(session, job, [(spec.space.key(config), config)])
        request = job_trial_request(session, job, trial.id, config, profile=False)

    staging = CompileStaging(catalogue, InProcessPool(tmp_path), H100.compute_capability,  # type: ignore[arg-type]
                             CudaProvenance("cuda", H100, "13.0", catalogue))  # fmt: skip
    staged = staging.stage(request, TimingPolicy())
    assert isinstance(staged, Staged), staged
    assert staged.message["energy"] is (objective != "time") and nvrtc.compiles == 1

    gpu = FakeGpu(kernel_s=1e-4, counter_moves=counter_moves)
    stream = types.SimpleNamespace(synchronize=gpu.synchronize)
    cupy = sys.modules["cupy"]  # the fixture's stand-in: its stream and events are the simulated GPU's
    cupy.cuda.get_current_stream = lambda: stream
    cupy.cuda.Event = lambda **_: _Event(gpu)
    child = session_module.Session(OnSimulatedGpu(gpu))
    child.catalogue = Catalogue()
    child.energy = meter_for(gpu, max_s=0.5)
    reply = child.measure(staged.message)
    measured = measurement_from_reply(request, staged, reply, 0.01, {}, Steps())  # type: ignore[arg-type]

    assert measured.verified and measured.timing is not None  # the time is kept whatever the meter did
    energy_keys = {*ENERGY_METRICS, ENERGY_MISSING, "energy_s"}
    assert energy_keys & set(measured.metrics) == recorded
    assert (gpu.launches > 2) is (objective != "time")  # verify twice (second input set), then the meter
