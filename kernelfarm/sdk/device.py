"""This machine's GPU as the farm names it: device name and compute capability, read through NVML."""

from __future__ import annotations

from dataclasses import dataclass

from kernelfarm.core.gpu import model_slug


@dataclass(frozen=True)
class LocalGpu:
    name: str  # as the driver reports it, e.g. "NVIDIA H100 80GB HBM3"
    compute_capability: str | None  # "9.0"

    @property
    def model(self) -> str:
        return model_slug(self.name)


def this_gpu(index: int = 0) -> LocalGpu:
    """The GPU at NVML index ``index``.

    Raises:
        RuntimeError: no NVIDIA driver or no such GPU (pass the GPU model explicitly instead).
    """
    import pynvml  # nvidia-ml-py: a dependency; the driver library itself may be missing

    try:
        pynvml.nvmlInit()
        try:
            handle = pynvml.nvmlDeviceGetHandleByIndex(index)
            name = pynvml.nvmlDeviceGetName(handle)
            major, minor = pynvml.nvmlDeviceGetCudaComputeCapability(handle)
        finally:
            pynvml.nvmlShutdown()
    except pynvml.NVMLError as exc:
        raise RuntimeError(f"cannot read GPU {index} through NVML ({exc}); give the GPU model explicitly") from None
    return LocalGpu(name.decode() if isinstance(name, bytes) else name, f"{major}.{minor}")
