"""A CPU stand-in for a GPU backend: deterministic synthetic timings, failures on demand.

Nothing runs: a config's "time" is derived from a hash of the kernel, problem and config, so the
same request always measures the same and different configs differ (a landscape with a minimum for
the strategies to find). It serves every kernel of the catalogue (or the specs handed to it) on any
problem its space accepts, so code that drives a backend (the contract suite, a worker started with
``kernelfarm worker --backend fake``) runs CUDA kernels' requests without a GPU. Its measurements say
so: ``provenance["backend"] == "fake"``.

Failures on demand: ``failures`` maps a config's canonical key (``spec.space.key(config)``, Kernel
Tuner's format) to the failure kind its measurement reports, one per :class:`FailureKind`. With
``memory_bytes`` it pretends a GPU of that much memory, as a GPU backend reports it, and refuses a
problem that needs more (``KernelSpec.device_bytes``) as the GPU backends do.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable, Mapping
from typing import Any

from kernelfarm.core.gpu import model_slug
from kernelfarm.core.measurement import Measurement, TimingStats
from kernelfarm.core.objectives import ENERGY_MISSING
from kernelfarm.core.states import FailureKind
from kernelfarm.kernels.spec import KernelSpec
from kernelfarm.worker.backends.base import (
    Backend,
    DeviceIdentity,
    MeasureRequest,
    ProfileOutcome,
    device_memory_refusal,
)
from kernelfarm.worker.measuring.catalogue import KernelCatalogue

FAKE_GPU_NAME = "Fake GPU"
_REPETITIONS = 10


class FakeBackend(Backend):
    name = "fake"

    def __init__(
        self,
        specs: Mapping[str, KernelSpec] | None = None,
        failures: Mapping[str, FailureKind] | None = None,
        gpu_name: str = FAKE_GPU_NAME,
        compile_s: float = 0.0,
        memory_bytes: int | None = None,
    ) -> None:
        """
        Args:
            specs: kernels by name, before the registry's.
            failures: config key -> the failure kind its measurement reports.
            gpu_name: the pretended device (its slug is the worker's GPU model).
            compile_s: a prepared request becomes ready this long after :meth:`prepare` (0: at once),
                to exercise callers that measure ready requests while others compile.
            memory_bytes: the pretended device's total memory (None: unknown, no problem refused).
        """
        self._catalogue = KernelCatalogue(specs)
        self.failures = dict(failures or {})
        self.gpu_name = gpu_name
        self.compile_s = compile_s
        self.memory_bytes = memory_bytes
        self._prepared: dict[str, float] = {}  # request key -> when prepare() was called
        self.closed = False

    def identity(self) -> DeviceIdentity:
        return DeviceIdentity(
            gpu_name=self.gpu_name,
            gpu_model=model_slug(self.gpu_name),
            gpu_uuid=f"fake-{model_slug(self.gpu_name)}",
            compute_capability=None,
            driver_version=None,
            cuda_version=None,
            extra={"fake": True},
            memory_bytes=self.memory_bytes,
        )

    def measure(self, request: MeasureRequest, keep_alive: Callable[[], bool] | None = None) -> Measurement:
        provenance = self._provenance(request)
        spec, invalid = self._check(request)
        if invalid is not None or spec is None:
            return Measurement.failed(FailureKind.CONSTRAINT, invalid or "unknown kernel", provenance=provenance)
        key = spec.space.key(request.config)
        kind = self.failures.get(key)
        if kind is not None:
            return Measurement.failed(kind, f"fake {kind.value} failure of config {key}, on demand",
                                      provenance=provenance)  # fmt: skip
        return Measurement(
            timing=TimingStats.from_times(synthetic_times_ms(request)),
            verified=True,
            metrics={"synthetic": True}
            | ({ENERGY_MISSING: "the fake backend has no energy meter"} if request.energy else {}),
            provenance=provenance,
        )

    def profile(self, requests: list[MeasureRequest]) -> list[ProfileOutcome]:
        """Synthetic "profiles": the pretended duration, or why there is none."""
        outcomes = []
        for request in requests:
            _, invalid = self._check(request)
            if invalid is not None:
                outcomes.append(ProfileOutcome(None, invalid))
                continue
            median = sorted(synthetic_times_ms(request))[_REPETITIONS // 2]
            outcomes.append(ProfileOutcome({"ncu_duration_ns": median * 1e6, "synthetic": True}))
        return outcomes

    def prepare(self, requests: list[MeasureRequest]) -> None:
        now = time.monotonic()
        for request in requests:
            self._prepared.setdefault(_request_key(request), now)

    def ready(self, request: MeasureRequest) -> bool:
        if self.compile_s <= 0 or self._check(request)[1] is not None:
            return True  # nothing to compile, or it fails at once
        prepared = self._prepared.get(_request_key(request))
        return prepared is not None and time.monotonic() - prepared >= self.compile_s

    def close(self) -> None:
        self.closed = True

    def _check(self, request: MeasureRequest) -> tuple[KernelSpec | None, str | None]:
        """(the kernel, None), or why the request cannot be measured."""
        try:
            spec = self._catalogue.spec(request.kernel_name, request.kernel_version)
        except Exception as exc:
            return None, str(exc)
        if not spec.space.contains(request.config, request.problem):
            return spec, (
                f"config {dict(request.config)} is not in the valid space of {spec.name} for {dict(request.problem)}"
            )
        if self.memory_bytes is not None:
            return spec, device_memory_refusal(spec, request.problem, self.memory_bytes)
        return spec, None

    def _provenance(self, request: MeasureRequest) -> dict[str, Any]:
        return {
            "backend": self.name,
            "note": "synthetic timing from a hash of the config; nothing was run",
            "gpu_name": self.gpu_name,
            "seed": request.seed,
        }


def synthetic_times_ms(request: MeasureRequest) -> list[float]:
    """The pretended repetitions of ``request``: 0.1-10 ms, with a deterministic 1 % spread."""
    digest = hashlib.sha256(_request_key(request).encode()).digest()
    base = 0.1 * 100 ** (int.from_bytes(digest[:4], "big") / 2**32)
    return [base * (1 + 0.01 * ((digest[4 + i] % 21) - 10) / 10) for i in range(_REPETITIONS)]


def _request_key(request: MeasureRequest) -> str:
    return json.dumps([request.kernel_name, dict(request.problem), dict(request.config)], sort_keys=True, default=str)
