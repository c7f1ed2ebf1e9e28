"""The measuring child: the only process of a worker that owns a CUDA context.

It receives requests over a pipe, loads cubins compiled elsewhere, makes inputs, verifies and
times. A fault that poisons the context (illegal address, unspecified launch failure, ...) is
reported and the child exits; the parent starts a fresh one. A hang is the parent's to detect
(it stops waiting and kills us).
"""

from __future__ import annotations

import importlib
import logging
import os
import time
import traceback
from collections.abc import Mapping
from dataclasses import asdict
from multiprocessing.connection import Connection
from typing import Any

from kernelfarm.core.states import FailureKind
from kernelfarm.kernels.spec import KernelSpec
from kernelfarm.worker.cuda.bench import BenchPolicy, L2Flusher, time_kernel
from kernelfarm.worker.cuda.verify import poison, relative_error

logger = logging.getLogger(__name__)

# CUDA errors after which the context is unusable: report and exit.
_STICKY = (
    "ILLEGAL_ADDRESS",
    "illegal memory access",
    "LAUNCH_FAILED",
    "unspecified launch failure",
    "MISALIGNED_ADDRESS",
    "ILLEGAL_INSTRUCTION",
    "HARDWARE_STACK_ERROR",
    "ASSERT",
    "LAUNCH_TIMEOUT",
    "IllegalAddress",
    "UNKNOWN",
    "ECC",
    "misaligned address",
    "illegal instruction",
)
# Launch configuration the kernel cannot run with: the context stays healthy.
_LAUNCH = (
    "OUT_OF_RESOURCES",
    "too many resources",
    "INVALID_VALUE",
    "INVALID_CONFIGURATION",
    "invalid argument",
    "invalid configuration",
)


def classify(message: str) -> tuple[FailureKind, bool]:
    """(failure kind, context poisoned?) for a CUDA error message."""
    if any(token in message for token in _STICKY):
        return FailureKind.CRASH, True
    if any(token in message for token in _LAUNCH):
        return FailureKind.LAUNCH, False
    return FailureKind.CRASH, True


def resolve_spec(name: str, refs: Mapping[str, str]) -> KernelSpec:
    """A kernel by name: ``refs`` ("module:ATTR") first (tests' fault kernels), else the registry."""
    if name in refs:
        module, _, attr = refs[name].partition(":")
        spec = getattr(importlib.import_module(module), attr or "SPEC")
    else:
        from kernelfarm.kernels.registry import get_kernel

        spec = get_kernel(name)
    if not isinstance(spec, KernelSpec) or spec.cuda is None:
        raise TypeError(f"{name}: not a CUDA kernel spec")
    return spec


class Session:
    """Per-child state: loaded modules, the current input set and its reference."""

    def __init__(self, refs: Mapping[str, str]) -> None:
        import cupy as cp

        self.cp = cp
        self.refs = dict(refs)
        self.device = cp.cuda.Device()
        self.attributes = self.device.attributes
        self.flush = L2Flusher(int(self.attributes.get("L2CacheSize", 64 << 20)))
        self._modules: dict[str, Any] = {}
        self._data_key: tuple[Any, ...] | None = None
        self._buffers: dict[str, Any] = {}
        self._reference: dict[str, Any] = {}

    def warm(self) -> float:
        """Load the kernel catalogue, the libraries every measurement uses (see
        :func:`warm_libraries`) and the L2 flush. Returns seconds."""
        from kernelfarm.kernels.registry import all_kernels

        started = time.perf_counter()
        # Importing and validating every kernel spec took 0.3-0.45 s inside a GPU's first
        # measurement of a job (an H200 host); here it is paid before the worker registers.
        all_kernels()
        warm_libraries()
        self.flush()
        self.cp.cuda.Stream.null.synchronize()
        return time.perf_counter() - started

    def function(self, cubin: str, entry: str) -> Any:
        module = self._modules.get(cubin)
        if module is None:
            module = self.cp.RawModule(path=cubin)
            self._modules[cubin] = module
        return module.get_function(entry)

    def data(self, spec: KernelSpec, problem: Mapping[str, Any], seed: int) -> tuple[dict[str, Any], dict[str, Any]]:
        shape_key = (spec.name, tuple(sorted(problem.items())))
        key = (*shape_key, seed)
        if key != self._data_key:
            assert spec.cuda is not None
            same_shape = self._data_key is not None and self._data_key[:-1] == shape_key
            self._buffers, self._reference, self._data_key = {}, {}, None
            # A new problem returns the old one's memory to the driver. A new seed for the same
            # problem keeps it in CuPy's pool: the next input set has the same sizes, and freeing
            # then allocating again cost 0.1-0.4 s on some trials (cudaFree waits for the device).
            if not same_shape:
                self.cp.get_default_memory_pool().free_all_blocks()
            self._buffers = spec.cuda.make_inputs(problem, seed)
            self._reference = spec.cuda.reference(self._buffers, problem)
            self.cp.cuda.Stream.null.synchronize()
            self._data_key = key
        return self._buffers, self._reference

    def measure(self, message: Mapping[str, Any]) -> dict[str, Any]:
        spec = resolve_spec(message["kernel"], self.refs)
        kernel = spec.cuda
        assert kernel is not None
        problem, config = message["problem"], message["config"]
        launch = kernel.launch(config, problem)
        function = self.function(message["cubin"], kernel.entry)
        resources = {
            "registers": int(function.num_regs),
            "local_bytes": int(function.local_size_bytes),
            "static_shared_bytes": int(function.shared_size_bytes),
            "dynamic_shared_bytes": launch.shared_bytes,
            "max_threads_per_block": int(function.max_threads_per_block),
            "threads_per_block": launch.threads,
        }
        # Checked before launching: the driver's own error for these is a bare "invalid argument".
        if launch.threads > resources["max_threads_per_block"]:
            return _failure(
                FailureKind.LAUNCH,
                (
                    f"too many resources requested for launch: {launch.threads} threads per block, this "
                    f"kernel allows {resources['max_threads_per_block']} ({resources['registers']} registers/thread)"
                ),
                resources,
            )
        smem_limit = int(self.attributes.get("MaxSharedMemoryPerBlockOptin", 48 << 10))
        if launch.shared_bytes + resources["static_shared_bytes"] > smem_limit:
            return _failure(
                FailureKind.LAUNCH,
                (
                    f"too much shared memory: {launch.shared_bytes} dynamic + {resources['static_shared_bytes']} "
                    f"static bytes > {smem_limit}"
                ),
                resources,
            )
        if launch.shared_bytes > 48 << 10:
            function.max_dynamic_shared_size_bytes = launch.shared_bytes

        data_start = time.perf_counter()
        buffers, reference = self.data(spec, problem, int(message["seed"]))
        data_s = time.perf_counter() - data_start
        args = tuple(kernel.arguments(buffers, problem))

        def run() -> None:
            function(launch.grid, launch.block, args, shared_mem=launch.shared_bytes)

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
            return _failure(
                FailureKind.WRONG_RESULT,
                f"relative error {worst:.3g} > tolerance {tolerance:.3g}",
                resources,
                rel_error=worst,
                gpu_s=time.perf_counter() - gpu_start,
            )
        policy = BenchPolicy(**message.get("policy", {}))
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


def _failure(kind: FailureKind, message: str, resources: dict[str, Any] | None = None, **extra: Any) -> dict[str, Any]:
    return {
        "status": "failure",
        "kind": kind.value,
        "message": message,
        "resources": resources or {},
        **extra,
    }


def environment() -> dict[str, Any]:
    import cupy as cp

    runtime = cp.cuda.runtime
    return {
        "cupy_version": cp.__version__,
        "cuda_runtime_version": runtime.runtimeGetVersion(),
        "cuda_driver_api_version": runtime.driverGetVersion(),
        "pid": os.getpid(),
    }


def serve(conn: Connection, device_ordinal: int, refs: Mapping[str, str]) -> None:
    """Child main loop (target of a spawned process)."""
    logging.basicConfig(level=os.environ.get("KERNELFARM_CHILD_LOG", "WARNING"))
    import cupy as cp

    cp.cuda.Device(device_ordinal).use()
    session = Session(refs)
    conn.send({"status": "ready", "environment": environment()})
    while True:
        try:
            message = conn.recv()
        except EOFError:
            return
        received, received_at = time.perf_counter(), time.time()
        op = message.get("op")
        if op == "stop":
            return
        try:
            if op == "measure":
                reply = session.measure(message)
            elif op == "warm":
                reply = {"status": "ok", "warm_s": session.warm()}
            elif op == "ceilings":
                from kernelfarm.worker.cuda.roofline import measure_ceilings

                reply = {"status": "ok", "ceilings": asdict(measure_ceilings())}
            else:
                reply = _failure(FailureKind.CRASH, f"unknown op {op!r}")
        except Exception as exc:  # a kernel fault is data; decide whether the context survived
            text = f"{type(exc).__name__}: {exc}"
            kind, poisoned = classify(text)
            if not _is_cuda_error(exc):
                kind, poisoned = FailureKind.CRASH, False
                text += "\n" + traceback.format_exc(limit=6)
            reply = _failure(kind, text)
            reply["poisoned"] = poisoned
            reply["seq"] = message.get("seq")
            conn.send(reply)
            if poisoned:
                return  # exit: the parent starts a fresh child with a fresh context
            continue
        reply["seq"] = message.get("seq")
        # The child's own time for this request: what the parent's wall time adds on top of it is
        # the pipe and the parent's wake-up; what it adds to gpu_s is module load and set-up.
        reply["child_s"] = time.perf_counter() - received
        # When it started, on the host's clock: with child_s, each GPU's timeline of a job.
        reply["child_started_at"] = received_at
        conn.send(reply)


def _is_cuda_error(exc: BaseException) -> bool:
    name = type(exc).__name__
    return name in {"CUDADriverError", "CUDARuntimeError", "CUDARuntimeError_"} or "CUDA" in str(exc)[:40]
