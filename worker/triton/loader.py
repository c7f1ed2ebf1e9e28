"""The triton backend's "load and launch" step in the measuring child: a kernel compiled ahead
(:mod:`.compiler`) loaded from Triton's cache files and launched through Triton's own launcher,
on CuPy's current stream, with CuPy arrays as its buffers.

See :mod:`kernelfarm.worker.measuring.loader` for the contract; the child does the rest (inputs,
reference, poisoning, verification, the one timing function). Triton's launcher takes any object
with a ``data_ptr()`` method as a pointer argument, so CuPy arrays travel as :class:`DevicePointer`
(no copy, no torch tensor); a TMA argument is a :class:`HostTensorDescriptor` over a CuPy array,
the fields Triton's launcher reads to encode the descriptor on the host.

Triton's driver layer finds the current device and the device's limits through torch, which the
child imports once (at warm-up); the kernels run in the same primary CUDA context as CuPy's.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kernelfarm.kernels.spec import KernelSpec
from kernelfarm.kernels.triton_kernel import BufferArg, TensorDescriptorArg, TritonKernel
from kernelfarm.worker.measuring.loader import KernelLoader, LaunchRefused, LoadedKernel


@dataclass(frozen=True)
class DevicePointer:
    """A device address as Triton's launcher takes it (an object with ``data_ptr()``)."""

    address: int

    def data_ptr(self) -> int:
        return self.address


@dataclass(frozen=True)
class HostTensorDescriptor:
    """What Triton's launcher reads of a host-side ``TensorDescriptor``: ``base.data_ptr()``,
    ``shape``, ``strides`` and ``padding`` (the block shape is compiled into the kernel)."""

    base: DevicePointer
    shape: tuple[int, ...]
    strides: tuple[int, ...]
    block_shape: tuple[int, ...]
    padding: str = "zero"


def triton_impl(spec: KernelSpec) -> TritonKernel | None:
    """The kernel's Triton implementation, or None when it has none."""
    return spec.impl("triton", TritonKernel) if "triton" in spec.backends else None


def entry_names(specs: Sequence[KernelSpec]) -> frozenset[str]:
    """The GPU names of every Triton kernel of ``specs``: what ncu's filter matches (Triton names a
    compiled kernel after its jit function, unmangled)."""
    return frozenset(name for spec in specs if (impl := triton_impl(spec)) is not None for name in impl.entries())


def launch_arguments(
    kernel: TritonKernel, arg_names: Sequence[str], constants: Mapping[Any, Any], buffers: Mapping[str, Any],
    config: Mapping[str, Any], problem: Mapping[str, Any], sm_count: int,
) -> list[Any]:  # fmt: skip
    """The launcher's positional arguments: one per parameter of the jit function, in order; a
    constant's slot carries its value (the launcher skips it).

    Raises:
        KeyError: the implementation gives no value for a runtime parameter.
    """
    given = kernel.arguments(config, problem, sm_count)
    out: list[Any] = []
    for index, name in enumerate(arg_names):
        if (index,) in constants:
            out.append(constants[(index,)])
            continue
        value = given[name]
        if isinstance(value, BufferArg):
            out.append(DevicePointer(int(buffers[value.buffer].data.ptr)))
        elif isinstance(value, TensorDescriptorArg):
            base = DevicePointer(int(buffers[value.buffer].data.ptr))
            out.append(HostTensorDescriptor(base, value.shape, value.strides, value.block_shape))
        else:
            out.append(value)
    return out


class TritonLoader(KernelLoader):
    """Loads kernels compiled ahead (each once per child) and binds them to CuPy buffers."""

    def __init__(self, cache_dir: str | None = None) -> None:
        """
        Args:
            cache_dir: the Triton cache the compile processes wrote (launchers are found there).
        """
        self.cache_dir = cache_dir
        self._kernels: dict[str, Any] = {}  # artifact -> CompiledKernel, filled inside the child only
        self._ready = False

    def __getstate__(self) -> dict[str, Any]:
        return {"cache_dir": self.cache_dir, "_kernels": {}, "_ready": False}

    def warm(self) -> None:
        """Import torch and Triton's driver and bind torch to CuPy's device (about 2 s, once)."""
        if self._ready:
            return
        import cupy as cp
        import torch

        from kernelfarm.worker.triton.compiler import use_cache_dir

        if self.cache_dir is not None:
            use_cache_dir(self.cache_dir)
        torch.cuda.set_device(cp.cuda.Device().id)
        self._ready = True

    def implementation(self, spec: KernelSpec) -> TritonKernel:
        impl = triton_impl(spec)
        if impl is None:
            raise TypeError(f"{spec.name}: not a Triton kernel spec")
        return impl

    def load(
        self, artifact: str, spec: KernelSpec, config: Mapping[str, Any], problem: Mapping[str, Any]
    ) -> LoadedTriton:
        """Load the compiled kernel named by ``artifact`` (a compile result's JSON: the job and the
        cache files).

        Raises:
            LaunchRefused: it needs more shared memory or threads than the device gives a block.
        """
        self.warm()
        kernel = self.implementation(spec)
        compiled = self._kernels.get(artifact)
        if compiled is None:
            compiled = self._compiled(artifact)
            self._kernels[artifact] = compiled
        metadata = compiled.metadata
        resources = {
            "shared_bytes": int(metadata.shared),
            "num_warps": int(metadata.num_warps),
            "num_stages": int(metadata.num_stages),
            "threads_per_block": int(metadata.num_warps) * 32,
        }
        try:
            compiled._init_handles()  # loads the module: the shared-memory and thread limits are checked here
        except Exception as exc:
            if type(exc).__name__ == "OutOfResources":
                raise LaunchRefused(str(exc), resources) from exc
            raise
        resources |= {"registers": int(compiled.n_regs), "spill_bytes": int(compiled.n_spills)}
        return LoadedTriton(compiled, kernel, config, resources)

    def _compiled(self, artifact: str) -> Any:
        from triton.compiler.compiler import CompiledKernel

        from kernelfarm.worker.triton.compiler import TritonCompileJob, ast_source

        data = json.loads(artifact)
        job = TritonCompileJob(**{k: _tuples(v) for k, v in data["job"].items()})
        return CompiledKernel(ast_source(job), data["metadata_group"], data["hash"])


def _tuples(value: Any) -> Any:
    """JSON gave lists where the job has tuples of pairs."""
    if isinstance(value, list):
        return tuple(tuple(item) if isinstance(item, list) else item for item in value)
    return value


class LoadedTriton(LoadedKernel):
    """A loaded Triton kernel with the config it was compiled for."""

    def __init__(self, compiled: Any, kernel: TritonKernel, config: Mapping[str, Any], resources: Mapping[str, int]):
        self.compiled, self.kernel, self.config = compiled, kernel, dict(config)
        self.resources = dict(resources)

    def bind(self, buffers: Mapping[str, Any], problem: Mapping[str, Any]) -> Callable[[], None]:
        import cupy as cp

        sm_count = int(cp.cuda.Device().attributes["MultiProcessorCount"])
        compiled = self.compiled
        source = compiled.src
        args = launch_arguments(self.kernel, source.fn.arg_names, source.constants, buffers, self.config, problem,
                                sm_count)  # fmt: skip
        gx, gy, gz = self.kernel.grid(self.config, problem, sm_count).dims
        launcher, function, packed = compiled.run, compiled.function, compiled.packed_metadata

        def run() -> None:
            # Triton's own launch path, on CuPy's current stream, without its launch hooks.
            launcher(gx, gy, gz, cp.cuda.get_current_stream().ptr, function, packed, None, None, None, *args)

        return run
