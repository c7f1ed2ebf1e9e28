"""The Triton backend: compile ahead (``triton.compile`` for the GPU's architecture, in a process
pool), measure in the shared measuring child (verify against the reference, time with the one
timing function), profile with Nsight Compute in batches, and attach roofline and provenance.

The GPU backends' shared composition (``worker/backends/gpu.py``), with Triton's compile step and loader:

- ``worker/triton/staging.py``: Triton compile jobs for the GPU's architecture, Triton's provenance;
- ``worker/triton/compiler.py``: the compile pool and Triton's on-disk cache;
- ``worker/triton/loader.py``: what the child does with a compiled kernel (load, bind CuPy buffers, launch);
- shared with the cuda backend: ``worker/measuring/`` (child, stream, timing, verifier, ceilings,
  roofline) and ``worker/cuda/`` (NVML identity and clocks, ncu batches and standby).

It measures the kernels with a ``"triton"`` implementation (``kernels/triton_kernel.py``); any other
kernel is a CONSTRAINT failure, as for the cuda backend. The worker process never imports Triton.
"""

from __future__ import annotations

import tempfile
from collections.abc import Sequence
from dataclasses import replace
from importlib import metadata
from pathlib import Path
from typing import Any

from kernelfarm.kernels.spec import KernelSpec
from kernelfarm.worker.backends.base import DeviceIdentity, MeasureRequest
from kernelfarm.worker.backends.gpu import GpuBackend, GpuBackendOptions
from kernelfarm.worker.cuda import device as nvml
from kernelfarm.worker.cuda.profile import LoaderRef
from kernelfarm.worker.cuda.provenance import CudaProvenance
from kernelfarm.worker.measuring.catalogue import KernelCatalogue
from kernelfarm.worker.measuring.loader import KernelLoader
from kernelfarm.worker.measuring.timing import TimingPolicy
from kernelfarm.worker.triton.compiler import TritonCompilePool
from kernelfarm.worker.triton.loader import TritonLoader, entry_names
from kernelfarm.worker.triton.staging import TritonStaging, triton_arch

# The triton backend's options are the GPU backends' (one set of knobs, one place); its cache_dir
# holds Triton's cache (subfolder "triton") and the measured ceilings.
TritonBackendOptions = GpuBackendOptions


def default_cache_dir() -> Path:
    """Where Triton's kernels and launchers and the measured ceilings go unless configured."""
    return Path(tempfile.gettempdir()) / "kernelfarm-triton"


def triton_version() -> str:
    """The installed Triton's version, read without importing it."""
    return metadata.version("triton")


class TritonProvenance(CudaProvenance):
    """The cuda backend's device identity and provenance, with Triton's version instead of NVRTC's."""

    def __init__(self, backend: str, device: nvml.NvmlDevice, version: str, catalogue: KernelCatalogue) -> None:
        super().__init__(backend, device, "", catalogue)
        self.triton_version = version

    def identity(self) -> DeviceIdentity:
        identity = super().identity()
        extra = {k: v for k, v in (identity.extra or {}).items() if k != "nvrtc_version"}
        return replace(identity, extra=extra | {"triton_version": self.triton_version})

    def for_request(self, request: MeasureRequest, policy: TimingPolicy) -> dict[str, Any]:
        out = super().for_request(request, policy)
        out.pop("nvrtc_version", None)
        return out | {"triton_version": self.triton_version}


class TritonBackend(GpuBackend):
    name = "triton"
    default_cache_dir = staticmethod(default_cache_dir)
    pool_start_timeout_s = 120.0

    def make_staging(self, catalogue: KernelCatalogue) -> TritonStaging:
        self.triton_version = triton_version()
        provenance = TritonProvenance(self.name, self.device, self.triton_version, catalogue)
        arch = triton_arch(self.device.compute_capability)
        pool = TritonCompilePool(self.triton_cache, self.options.compile_workers, arch=arch)
        return TritonStaging(catalogue, pool, self.device.compute_capability, provenance, self.triton_version)

    @property
    def triton_cache(self) -> Path:
        return self.cache_dir / "triton"

    def loader(self) -> KernelLoader:
        return TritonLoader(str(self.triton_cache))

    def profile_loader(self) -> LoaderRef | None:
        return LoaderRef("kernelfarm.worker.triton.loader:TritonLoader", {"cache_dir": str(self.triton_cache)})

    def entry_names(self, specs: Sequence[KernelSpec]) -> frozenset[str]:
        return entry_names(specs)
