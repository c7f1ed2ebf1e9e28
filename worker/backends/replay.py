"""The replay backend: serves recorded measurements from Kernel Tuner cache files.

It makes the whole farm runnable and testable without a GPU. It never pretends otherwise: every
measurement's provenance says ``"backend": "replay"`` and names the recording, and the worker
registers with backend "replay". Its GPU model is the recorded device's.

Optionally it sleeps for each trial (a fixed time, and/or the recorded time scaled) so load and
scaling experiments see realistic trial durations; a stream of requests is measured on a thread of
its own, as the cuda backend measures in its child process.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from kernelfarm.core.errors import NotFound
from kernelfarm.core.gpu import model_slug
from kernelfarm.core.landscape import Landscape, load_landscape, read_json_tolerant
from kernelfarm.core.measurement import Measurement, TimingStats
from kernelfarm.core.objectives import ENERGY_MISSING
from kernelfarm.core.recording_file import one_device
from kernelfarm.core.states import FailureKind
from kernelfarm.kernels.recorded import problem_of
from kernelfarm.kernels.registry import get_kernel
from kernelfarm.worker.backends.base import Backend, DeviceIdentity, KeepAlive, MeasureRequest


class ReplayBackend(Backend):
    name = "replay"

    def __init__(self, paths: Sequence[Path], sleep_ms: float = 0.0, time_scale: float = 0.0) -> None:
        if not paths:
            raise ValueError("the replay backend needs at least one landscape file")
        self.landscapes = [load_landscape(Path(p)) for p in paths]
        self.device_name = one_device(landscape.device_name for landscape in self.landscapes)
        self.sleep_ms = sleep_ms
        self.time_scale = time_scale
        # (kernel name, problem as canonical JSON) → landscape
        self._index: dict[tuple[str, str], Landscape] = {}
        for landscape in self.landscapes:
            self._index[(landscape.kernel_name, _problem_json(recorded_problem(landscape)))] = landscape

    def identity(self) -> DeviceIdentity:
        return DeviceIdentity(
            gpu_name=self.device_name,
            gpu_model=model_slug(self.device_name),
            gpu_uuid=None,
            compute_capability=None,
            driver_version=None,
            cuda_version=None,
            extra={"replay": [str(landscape.path.name) for landscape in self.landscapes]},
        )

    def kernels(self) -> list[tuple[str, dict[str, Any]]]:
        return [(landscape.kernel_name, recorded_problem(landscape)) for landscape in self.landscapes]

    def _landscape(self, request: MeasureRequest) -> Landscape | None:
        """The recording of the request's kernel and problem: one this worker was started with, or
        the recording uploaded with the kernel version the job pinned (fetched from the farm and
        cached on this host), when it was recorded on this worker's GPU model."""
        key = (request.kernel_name, _problem_json(request.problem))
        found = self._index.get(key)
        if found is not None or request.kernel_version is None:
            return found
        try:
            spec = get_kernel(request.kernel_name, request.kernel_version)
        except NotFound:
            return None
        recordings = spec.recordings
        if recordings is None or model_slug(self.device_name) not in recordings.gpu_models:
            return None
        if not recordings.covers(request.problem):
            return None
        landscape = load_landscape(recordings.paths[0])
        self._index[key] = landscape
        return landscape

    def measure(self, request: MeasureRequest, keep_alive: Callable[[], bool] | None = None) -> Measurement:
        landscape = self._landscape(request)
        provenance: dict[str, Any] = {
            "backend": "replay",
            "note": "replayed recorded measurement, not measured by this farm",
            "device_name": self.device_name,
        }
        if landscape is None:
            return Measurement.failed(
                FailureKind.CONSTRAINT,
                f"no recording of {request.kernel_name} for problem {dict(request.problem)} on {self.device_name}",
                provenance=provenance,
            )
        provenance["recording"] = landscape.path.name
        if request.kernel_version is not None:
            provenance["kernel_version"] = request.kernel_version
        if set(request.config) != set(landscape.space.names):
            return Measurement.failed(
                FailureKind.CONSTRAINT,
                f"config {dict(request.config)} does not name the parameters {list(landscape.space.names)}",
                provenance=provenance,
            )
        key = landscape.space.key(request.config)
        entry = landscape.entries.get(key)
        if entry is None:
            return Measurement.failed(
                FailureKind.CONSTRAINT, f"config {key} is not in the recording", provenance=provenance
            )
        self._pretend_to_work(entry.time_ms)
        if entry.failure is not None:
            return Measurement.failed(entry.failure, f"recorded failure: {entry.failure_message}",
                                      provenance=provenance)  # fmt: skip
        return Measurement(
            timing=TimingStats.from_times(entry.times_ms),
            verified=True,  # the recording tool verified it; provenance says it is a replay
            metrics={"recorded_mean_ms": entry.mean_ms} | _no_energy(request),
            provenance=provenance,
        )

    def measure_stream(self, requests: Iterable[tuple[MeasureRequest, KeepAlive]]) -> Iterator[Measurement]:
        """As the cuda backend does with its measuring child: the next request is queued on a
        "device" thread before the current result is handed back, so the caller's result write and
        next claim overlap the (pretended) measurement, as they do on a GPU worker."""
        device = ThreadPoolExecutor(1, thread_name_prefix="replay-device")
        try:
            source = iter(requests)
            first = next(source, None)
            current = device.submit(self.measure, *first) if first is not None else None
            while current is not None:
                upcoming = next(source, None)
                queued = device.submit(self.measure, *upcoming) if upcoming is not None else None
                yield current.result()
                current = queued
        finally:
            # Interrupted (a soft time limit): a pretended measurement left running only sleeps.
            device.shutdown(wait=False, cancel_futures=True)

    def _pretend_to_work(self, recorded_ms: float | None) -> None:
        seconds = self.sleep_ms / 1e3 + (recorded_ms or 0.0) * self.time_scale / 1e3
        if seconds > 0:
            time.sleep(seconds)


def recorded_problem(landscape: Landscape) -> dict[str, Any]:
    """The problem of a recording: an explicit ``"problem"`` object in the file (our own
    recordings write one), else Kernel Tuner's ``problem_size`` as size_x/size_y/size_z."""
    explicit = read_json_tolerant(landscape.path).get("problem") if _has_explicit_problem(landscape) else None
    return dict(explicit) if isinstance(explicit, Mapping) else problem_of(landscape)


def _has_explicit_problem(landscape: Landscape) -> bool:
    return landscape.path.parent.name == "landscapes"  # kernels/<name>/landscapes/: our own recordings


def _problem_json(problem: Mapping[str, Any]) -> str:
    return json.dumps(dict(problem), sort_keys=True)


def _no_energy(request: MeasureRequest) -> dict[str, Any]:
    """Why a trial of a job that ranks by energy has none here (recordings hold times only)."""
    return (
        {ENERGY_MISSING: "the replay backend has no energy meter (recordings hold times only)"}
        if request.energy
        else {}
    )
