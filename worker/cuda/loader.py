"""The cuda backend's "load and launch" step in the measuring child: an NVRTC cubin loaded with
CuPy's RawModule, launched with the grid, block and shared memory its CUDA implementation gives.

See :mod:`kernelfarm.worker.measuring.loader` for the contract; the child does the rest.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from kernelfarm.kernels.spec import KernelSpec
from kernelfarm.worker.cuda.compiler import lowered_name
from kernelfarm.worker.cuda.implementation import cuda_impl
from kernelfarm.worker.measuring.loader import KernelLoader, LaunchRefused, LoadedKernel

if TYPE_CHECKING:
    from kernelfarm.kernels.cuda_kernel import CudaKernel, Launch

# Dynamic shared memory above this needs the kernel's opt-in attribute (a CUDA rule).
_DEFAULT_DYNAMIC_SHARED = 48 << 10


class CubinLoader(KernelLoader):
    """Loads cubins (each module once per child) and checks a launch against the function's limits."""

    def __init__(self) -> None:
        # Filled inside the child only: CuPy objects never travel through the pickle.
        self._modules: dict[str, Any] = {}
        self._attributes: dict[str, int] | None = None

    def __getstate__(self) -> dict[str, Any]:
        return {"_modules": {}, "_attributes": None}

    def implementation(self, spec: KernelSpec) -> CudaKernel:
        impl = cuda_impl(spec)
        if impl is None:
            raise TypeError(f"{spec.name}: not a CUDA kernel spec")
        return impl

    def load(
        self, artifact: str, spec: KernelSpec, config: Mapping[str, Any], problem: Mapping[str, Any]
    ) -> LoadedCubin:
        """Load the cubin at ``artifact`` and check the config's launch against its limits.

        Raises:
            LaunchRefused: more threads per block than the compiled function allows, or more shared
                memory than the device gives a block. Checked before launching: the driver's own
                error for these is a bare "invalid argument".
        """
        kernel = self.implementation(spec)
        launch = kernel.launch(config, problem)
        expression = kernel.name_expression(config, problem)
        function = self._function(artifact, kernel.entry if expression is None else lowered_name(artifact, expression))

        resources = {
            "registers": int(function.num_regs),
            "local_bytes": int(function.local_size_bytes),
            "static_shared_bytes": int(function.shared_size_bytes),
            "dynamic_shared_bytes": launch.shared_bytes,
            "max_threads_per_block": int(function.max_threads_per_block),
            "threads_per_block": launch.threads,
        }
        if launch.threads > resources["max_threads_per_block"]:
            raise LaunchRefused(
                f"too many resources requested for launch: {launch.threads} threads per block, this "
                f"kernel allows {resources['max_threads_per_block']} ({resources['registers']} registers/thread)",
                resources,
            )
        smem_limit = int(self._device_attributes().get("MaxSharedMemoryPerBlockOptin", _DEFAULT_DYNAMIC_SHARED))
        if launch.shared_bytes + resources["static_shared_bytes"] > smem_limit:
            raise LaunchRefused(
                f"too much shared memory: {launch.shared_bytes} dynamic + {resources['static_shared_bytes']} "
                f"static bytes > {smem_limit}",
                resources,
            )
        if launch.shared_bytes > _DEFAULT_DYNAMIC_SHARED:
            function.max_dynamic_shared_size_bytes = launch.shared_bytes
        return LoadedCubin(function, launch, kernel, resources, self._modules[artifact])

    def _function(self, cubin: str, entry: str) -> Any:
        module = self._modules.get(cubin)
        if module is None:
            import cupy as cp

            module = cp.RawModule(path=cubin)
            self._modules[cubin] = module
        return module.get_function(entry)

    def _device_attributes(self) -> dict[str, int]:
        if self._attributes is None:
            import cupy as cp

            self._attributes = dict(cp.cuda.Device().attributes)
        return self._attributes


class LoadedCubin(LoadedKernel):
    """A cubin's function with its launch configuration."""

    def __init__(
        self, function: Any, launch: Launch, kernel: CudaKernel, resources: Mapping[str, int], module: Any = None
    ) -> None:
        self.function, self.launch, self.kernel, self.module = function, launch, kernel, module
        self.resources = dict(resources)

    def bind(self, buffers: Mapping[str, Any], problem: Mapping[str, Any]) -> Callable[[], None]:
        """Also fills the kernel's ``__constant__`` symbols from their buffers (Kernel Tuner's
        cmem_args), once, outside the timed launches."""
        for symbol, name in self.kernel.constant_memory().items():
            import cupy as cp

            source = cp.ascontiguousarray(buffers[name])
            self.module.get_global(symbol).copy_from_device(source.data, source.nbytes)
        args = tuple(self.kernel.arguments(buffers, problem))
        function, launch = self.function, self.launch

        def run() -> None:
            function(launch.grid, launch.block, args, shared_mem=launch.shared_bytes)

        return run
