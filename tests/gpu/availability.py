"""Can this process run GPU tests? Shared by every gpu-marked suite, so all skip with the same reason."""

from __future__ import annotations

import importlib.util


def gpu_missing() -> str | None:
    """Why GPU tests cannot run here, or None. Asks NVML, not CUDA: the test process must stay without
    a CUDA context (the backends' measuring children own the GPU)."""
    if importlib.util.find_spec("cupy") is None:
        return "CuPy is not installed (GPU tests run on the device machine)"
    try:
        import pynvml

        pynvml.nvmlInit()
        if pynvml.nvmlDeviceGetCount() == 0:
            return "no NVIDIA GPU"
    except Exception as exc:
        return f"no NVIDIA GPU visible through NVML ({exc})"
    return None
