"""What the measuring child keeps between requests, and how it measures one: the backend's loader
loads and binds the kernel; inputs, reference, poisoning, verification and timing are shared.

Runs only inside the measuring child (CuPy on the current device).
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from kernelfarm.core.states import FailureKind
from kernelfarm.kernels.spec import KernelSpec
from kernelfarm.worker.measuring.catalogue import KernelCatalogue
from kernelfarm.worker.measuring.loader import KernelLoader, LaunchRefused, MeasurableKernel
from kernelfarm.worker.measuring.timing import L2Flusher, TimingPolicy, time_kernel
from kernelfarm.worker.measuring.verifier import poison, relative_error


class Session:
    """Per-child state: the current input set and its reference, the L2 flush."""

    def __init__(self, loader: KernelLoader, refs: Mapping[str, str] | None = None) -> None:
        """
        Args:
            loader: the backend's load-and-launch step.
            refs: kernel name -> ``"module:ATTR"`` for kernels outside the registry.
        """
        import cupy as cp

        self.cp = cp
        self.loader = loader
        self.catalogue = KernelCatalogue(refs=refs)
        self.flush = L2Flusher(int(cp.cuda.Device().attributes.get("L2CacheSize", 64 << 20)))
        self._data_key: tuple[Any, ...] | None = None
        self._buffers: dict[str, Any] = {}
        self._reference: dict[str, Any] = {}

    def warm(self) -> float:
        """Load the kernel catalogue, the libraries every measurement uses (see
        :func:`warm_libraries`), the backend loader's own (:meth:`KernelLoader.warm`) and the L2
        flush. Returns seconds."""
        from kernelfarm.kernels.registry import all_kernels

        started = time.perf_counter()
        # Importing and validating every kernel spec took 0.3-0.45 s inside a GPU's first
        # measurement of a job (an H200 host); here it is paid before the worker registers.
        all_kernels()
        warm_libraries()
        self.loader.warm()
        self.flush()
        self.cp.cuda.Stream.null.synchronize()
        return time.perf_counter() - started

    def data(
        self, spec: KernelSpec, kernel: MeasurableKernel, problem: Mapping[str, Any], seed: int
    ) -> tuple[dict[str, Any], dict[str, Any]]:
        """The inputs and reference for ``problem`` and ``seed``: kept while consecutive requests
        share them (the configs of one job do)."""
        shape_key = (spec.name, tuple(sorted(problem.items())))
        key = (*shape_key, seed)
        if key != self._data_key:
            same_shape = self._data_key is not None and self._data_key[:-1] == shape_key
            self._buffers, self._reference, self._data_key = {}, {}, None
            # A new problem returns the old one's memory to the driver. A new seed for the same
            # problem keeps it in CuPy's pool: the next input set has the same sizes, and freeing
            # then allocating again cost 0.1-0.4 s on some trials (cudaFree waits for the device).
            if not same_shape:
                self.cp.get_default_memory_pool().free_all_blocks()
            self._buffers = kernel.make_inputs(problem, seed)
            self._reference = kernel.reference(self._buffers, problem)
            self.cp.cuda.Stream.null.synchronize()
            self._data_key = key
        return self._buffers, self._reference

    def measure(self, message: Mapping[str, Any]) -> dict[str, Any]:
        """Verify, then time, one compiled config.

        Args:
            message: ``kernel``, ``problem``, ``config``, ``seed``, ``artifact`` (for the loader)
                and ``policy`` (a :class:`TimingPolicy` as a dict).

        Returns:
            The reply: ``status`` "ok" with ``times_ms``, or "failure" with ``kind`` and ``message``;
            both with ``resources``, and the time split (``gpu_s``, ``data_s``) where known.

        Raises:
            Exception: a fault while loading or running (the child classifies it).
        """
        spec = self.catalogue.spec(message["kernel"])
        kernel = self.loader.implementation(spec)
        problem, config = message["problem"], message["config"]
        try:
            loaded = self.loader.load(message["artifact"], spec, config, problem)
        except LaunchRefused as refused:
            return failure_reply(FailureKind.LAUNCH, str(refused), refused.resources)
        resources = dict(loaded.resources)

        data_start = time.perf_counter()
        buffers, reference = self.data(spec, kernel, problem, int(message["seed"]))
        data_s = time.perf_counter() - data_start
        run = loaded.bind(buffers, problem)

        gpu_start = time.perf_counter()
        for name in kernel.outputs():
            poison(buffers[name])
        run()
        self.cp.cuda.Stream.null.synchronize()
        worst = 0.0
        for name in kernel.outputs():
            worst = max(worst, relative_error(buffers[name], reference[name]))
        tolerance = kernel.tolerance(problem)
        if not worst <= tolerance:
            return failure_reply(
                FailureKind.WRONG_RESULT,
                f"relative error {worst:.3g} > tolerance {tolerance:.3g}",
                resources,
                rel_error=worst,
                gpu_s=time.perf_counter() - gpu_start,
            )
        policy = TimingPolicy(**message.get("policy", {}))
        stats = time_kernel(run, policy, flush=self.flush)
        return {
            "status": "ok",
            "times_ms": list(stats.times_ms),
            "rel_error": worst,
            "resources": resources,
            "gpu_s": time.perf_counter() - gpu_start,
            "data_s": data_s,
        }


def warm_libraries() -> None:
    """Use what making inputs, poisoning and checking use, so that the first real request does not
    pay for loading it: cuRAND, cuBLAS, and CuPy's elementwise and reduction kernels (compiled on
    first use, or loaded from CuPy's disk cache)."""
    import cupy as cp

    rng = cp.random.default_rng(0)
    for dtype in (cp.float32, cp.float64):
        a = rng.random((64, 64), dtype=dtype) * 2 - 1
        b = rng.standard_normal((64, 64), dtype=dtype)
        product = cp.matmul(a, b)
        poison(product)
        relative_error(product, cp.matmul(a, b))
    relative_error(cp.ones(64, dtype=cp.uint16), cp.ones(64, dtype=cp.uint16))  # the bf16 path
    cp.cuda.Stream.null.synchronize()


def failure_reply(
    kind: FailureKind, message: str, resources: Mapping[str, Any] | None = None, **extra: Any
) -> dict[str, Any]:
    """A reply of the child for a request that ended in a failure of ``kind``."""
    return {
        "status": "failure",
        "kind": kind.value,
        "message": message,
        "resources": dict(resources or {}),
        **extra,
    }
