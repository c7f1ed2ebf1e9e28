"""The real-GPU backend: NVRTC in a process pool, the cubin loaded by the measuring child.

Everything but the compiler and the loader is the GPU backends' shared composition
(``worker/backends/gpu.py``); the cuda backend's own parts:

- ``worker/cuda/staging.py``: NVRTC compile jobs for the GPU's architecture, NVRTC's provenance;
- ``worker/cuda/compiler.py``: the NVRTC pool and the cubin cache;
- ``worker/cuda/toolkit_headers.py``: the CUDA headers NVRTC may include;
- ``worker/cuda/loader.py``: what the child does with a cubin (load and launch).
"""

from __future__ import annotations

import logging
import tempfile
from collections.abc import Sequence
from concurrent.futures import Future
from pathlib import Path
from typing import Any

from kernelfarm.kernels.spec import KernelSpec
from kernelfarm.worker.backends.base import MeasureRequest
from kernelfarm.worker.backends.gpu import GpuBackend, GpuBackendOptions
from kernelfarm.worker.cuda import device as nvml
from kernelfarm.worker.cuda.compiler import CompilePool, CompileResult, nvrtc_version
from kernelfarm.worker.cuda.implementation import entry_names
from kernelfarm.worker.cuda.loader import CubinLoader
from kernelfarm.worker.cuda.profile import LoaderRef
from kernelfarm.worker.cuda.provenance import CudaProvenance
from kernelfarm.worker.cuda.staging import CompileStaging
from kernelfarm.worker.cuda.toolkit_headers import find_toolkit_headers
from kernelfarm.worker.measuring.catalogue import KernelCatalogue
from kernelfarm.worker.measuring.compile_pool import ProcessCompilePool
from kernelfarm.worker.measuring.loader import KernelLoader

logger = logging.getLogger(__name__)

# The cuda backend's options are the GPU backends' (one set of knobs, one place).
CudaBackendOptions = GpuBackendOptions


def default_cache_dir() -> Path:
    """Where cubins and measured ceilings go unless configured (Settings.cuda_cache)."""
    return Path(tempfile.gettempdir()) / "kernelfarm-cuda"


class CudaBackend(GpuBackend):
    name = "cuda"
    default_cache_dir = staticmethod(default_cache_dir)

    def make_staging(self, catalogue: KernelCatalogue) -> CompileStaging:
        self.nvrtc_version = nvrtc_version()
        provenance = CudaProvenance(self.name, self.device, self.nvrtc_version, catalogue)
        warm_arch = nvml.arch_for(self.device.compute_capability)
        pool = CompilePool(self.cache_dir / "cubin", self.options.compile_workers, warm_arch=warm_arch)
        toolkit = find_toolkit_headers(self.options.cuda_include_dirs)
        if toolkit is not None:
            logger.info("NVRTC includes CUDA headers from %s (%s)", ", ".join(toolkit.dirs), toolkit.fingerprint)
        return CompileStaging(catalogue, pool, self.device.compute_capability, provenance, toolkit)

    def loader(self) -> KernelLoader:
        return CubinLoader()

    def profile_loader(self) -> LoaderRef | None:
        return None

    def entry_names(self, specs: Sequence[KernelSpec]) -> frozenset[str]:
        return entry_names(specs)

    def compile(self, request: MeasureRequest) -> Future[CompileResult]:
        """One config's compile on its own (the sweep benchmark times compiles apart from measuring)."""
        return self._staging.compile(request)

    @property
    def compile_pool(self) -> ProcessCompilePool[Any, Any]:
        return self._staging.pool
