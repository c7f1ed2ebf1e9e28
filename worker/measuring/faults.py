"""Which CUDA errors a kernel can cause, and whether the context survives them.

A kernel fault is data (a failure kind), but some faults poison the CUDA context: every later call in
that process fails too. The measuring child asks :func:`classify_error` after each failed request and
exits when the answer is "poisoned", so its parent starts a fresh one. Any backend whose kernels run
on the CUDA driver (CuPy modules, Triton) faults with these same messages.
"""

from __future__ import annotations

from kernelfarm.core.states import FailureKind

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


# Allocation failures: CuPy's pool, the runtime, the driver, cuBLAS. The context survives them.
_OUT_OF_MEMORY = (
    "OutOfMemoryError",
    "cudaErrorMemoryAllocation",
    "CUDA_ERROR_OUT_OF_MEMORY",
    "CUBLAS_STATUS_ALLOC_FAILED",
)


def is_out_of_memory(exc: BaseException) -> bool:
    """Did ``exc`` come from a device allocation that found no memory (not from a faulting kernel)?"""
    text = f"{type(exc).__name__}: {exc}"
    return any(token in text for token in _OUT_OF_MEMORY)


def classify_error(message: str) -> tuple[FailureKind, bool]:
    """The failure kind of a CUDA error message, and whether it poisoned the context.

    Args:
        message: the exception's type name and text.

    Returns:
        (kind, poisoned). An error that is not recognised counts as a crash that poisoned the
        context: a fresh child is cheaper than measuring on a broken one.
    """
    if any(token in message for token in _STICKY):
        return FailureKind.CRASH, True
    if any(token in message for token in _LAUNCH):
        return FailureKind.LAUNCH, False
    return FailureKind.CRASH, True


def is_cuda_error(exc: BaseException) -> bool:
    """Did the CUDA driver or runtime raise this (rather than our own code or the kernel's spec)?"""
    name = type(exc).__name__
    return name in {"CUDADriverError", "CUDARuntimeError", "CUDARuntimeError_"} or "CUDA" in str(exc)[:40]
