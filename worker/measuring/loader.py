"""The per-backend step of the measuring child: load a compiled kernel and launch it.

Everything else the child does is shared by every GPU backend: make the inputs and the reference
(from the kernel's implementation), poison the outputs, run once and verify, time with the one
timing function, and classify faults. A backend supplies a :class:`KernelLoader` that knows its own
artifacts: the cuda backend's loads an NVRTC cubin with CuPy (``worker/cuda/loader.py``); a Triton
backend's would load its compiled kernel and bind its launcher the same way.

The loader is pickled into the spawned child, so it is a plain importable object that imports and
loads nothing (no CuPy, no device) until it is used there.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

from kernelfarm.kernels.spec import KernelSpec


class MeasurableKernel(Protocol):
    """What the measuring child needs of a kernel's implementation for one backend. Arrays live on
    the current device; the CUDA implementation (``kernels/cuda_kernel.py``) is one."""

    def make_inputs(self, problem: Mapping[str, Any], seed: int) -> dict[str, Any]:
        """Fresh random inputs (never zeros) and the output buffer(s), by name."""
        ...

    def outputs(self) -> Sequence[str]:
        """Names of the buffers the kernel writes (poisoned before the verifying run, checked after)."""
        ...

    def reference(self, buffers: Mapping[str, Any], problem: Mapping[str, Any]) -> dict[str, Any]:
        """Expected output(s), by name, computed by a trusted library."""
        ...

    def tolerance(self, problem: Mapping[str, Any]) -> float:
        """Maximum relative error accepted."""
        ...


class LaunchRefused(Exception):
    """The kernel cannot run with this config's launch (too many threads per block, too much shared
    memory), found before launching it: a LAUNCH failure, reported with the resources that say why."""

    def __init__(self, message: str, resources: Mapping[str, int]) -> None:
        super().__init__(message)
        self.resources = dict(resources)


class LoadedKernel(ABC):
    """One config's kernel, loaded on the device and ready to be bound to its buffers."""

    #: reported with the measurement: registers, shared memory, threads per block, ...
    resources: Mapping[str, int]

    @abstractmethod
    def bind(self, buffers: Mapping[str, Any], problem: Mapping[str, Any]) -> Callable[[], None]:
        """The launch the child verifies and times.

        Args:
            buffers: the inputs and outputs made by the implementation's ``make_inputs``.
            problem: the normalized problem.

        Returns:
            A callable that enqueues one run on the current stream and never synchronizes.
        """


class KernelLoader(ABC):
    """A backend's "load and launch" step, run inside the measuring child."""

    def warm(self) -> None:  # noqa: B027 - optional hook
        """Pay the loader's one-time costs (imports, driver set-up) when the child warms up, not in
        the first measurement. Optional; called again before loads, so it must be cheap then."""

    @abstractmethod
    def implementation(self, spec: KernelSpec) -> MeasurableKernel:
        """The spec's implementation for this backend.

        Raises:
            TypeError: the kernel has no implementation for this backend.
        """

    @abstractmethod
    def load(
        self, artifact: str, spec: KernelSpec, config: Mapping[str, Any], problem: Mapping[str, Any]
    ) -> LoadedKernel:
        """Load one config's compiled kernel.

        Args:
            artifact: what the backend's compile step produced, as the backend named it in the
                child's request (the cuda backend: a cubin's path).
            spec: the kernel.
            config: the point of its space that was compiled.
            problem: the normalized problem.

        Returns:
            The kernel, ready to bind to buffers.

        Raises:
            LaunchRefused: the config cannot launch on this device (a LAUNCH failure).
            Exception: anything else counts as a fault (see :mod:`.faults`).
        """
