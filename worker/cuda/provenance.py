"""Who measured, on what: the cuda backend's device identity and the provenance of each request.

Every measurement records GPU name/UUID/compute capability, driver, CUDA and NVRTC
versions, clocks, compile options and the kernel source hash. The device part comes from NVML
(no CUDA context in the worker process); the compile part is added by the staging step, the clocks
and the child's runtime versions by the measure stream.
"""

from __future__ import annotations

import contextlib
from dataclasses import asdict
from typing import Any

from kernelfarm.core.gpu import model_slug
from kernelfarm.worker.backends.base import DeviceIdentity, MeasureRequest
from kernelfarm.worker.cuda import device as nvml
from kernelfarm.worker.measuring.catalogue import KernelCatalogue
from kernelfarm.worker.measuring.timing import TimingPolicy


class CudaProvenance:
    """The device's identity, and what every measurement on it records."""

    def __init__(self, backend: str, device: nvml.NvmlDevice, nvrtc_version: str, catalogue: KernelCatalogue) -> None:
        """
        Args:
            backend: the backend's name, recorded with every measurement.
            device: the GPU, as NVML reports it.
            nvrtc_version: the NVRTC the compile pool uses.
            catalogue: where a request's kernel (and so its source hash) is found.
        """
        self.backend = backend
        self.device = device
        self.nvrtc_version = nvrtc_version
        self.catalogue = catalogue

    def identity(self) -> DeviceIdentity:
        d = self.device
        return DeviceIdentity(
            gpu_name=d.name,
            gpu_model=model_slug(d.name),
            gpu_uuid=d.uuid,
            compute_capability=d.compute_capability,
            driver_version=d.driver_version,
            cuda_version=d.cuda_driver_version,
            extra={
                "nvrtc_version": self.nvrtc_version,
                "memory_bytes": d.memory_bytes,
                "max_sm_clock_mhz": d.max_sm_clock_mhz,
                "max_mem_clock_mhz": d.max_mem_clock_mhz,
            },
            memory_bytes=d.memory_bytes,
        )

    def for_request(self, request: MeasureRequest, policy: TimingPolicy) -> dict[str, Any]:
        """What every measurement of ``request`` records, known before anything is compiled."""
        d = self.device
        out: dict[str, Any] = {
            "backend": self.backend,
            "gpu_name": d.name,
            "gpu_uuid": d.uuid,
            "compute_capability": d.compute_capability,
            "driver_version": d.driver_version,
            "cuda_driver_version": d.cuda_driver_version,
            "nvrtc_version": self.nvrtc_version,
            "seed": request.seed,
            "timing_policy": asdict(policy),
        }
        with contextlib.suppress(Exception):  # an unknown kernel is reported by the validity check
            spec = self.catalogue.spec(request.kernel_name, request.kernel_version)
            out["source_hash"] = spec.source_hash
            out["kernel_version"] = spec.version
        return out

    def clocks(self) -> dict[str, Any]:
        """The GPU's clocks, temperature, power and throttle reasons now (best effort)."""
        return nvml.read_clocks(self.device.index)
