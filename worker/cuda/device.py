"""Device identity and clocks through NVML: no CUDA context needed, so the worker process (which
must never hold one) can report who it is and stamp clocks on every measurement."""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from typing import Any

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class NvmlDevice:
    index: int  # NVML index (after CUDA_VISIBLE_DEVICES mapping, see visible_nvml_index)
    name: str
    uuid: str
    compute_capability: str
    driver_version: str
    cuda_driver_version: str
    memory_bytes: int
    max_sm_clock_mhz: int
    max_mem_clock_mhz: int


def _nvml() -> Any:
    import pynvml

    pynvml.nvmlInit()
    return pynvml


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def visible_nvml_index(ordinal: int = 0) -> int:
    """NVML numbers all GPUs of the host; CUDA_VISIBLE_DEVICES picks and re-numbers them."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES", "").strip()
    if not visible:
        return ordinal
    entries = [e.strip() for e in visible.split(",") if e.strip()]
    chosen = entries[ordinal]
    if chosen.isdigit():
        return int(chosen)
    nv = _nvml()
    for index in range(nv.nvmlDeviceGetCount()):
        if _text(nv.nvmlDeviceGetUUID(nv.nvmlDeviceGetHandleByIndex(index))).startswith(chosen):
            return index
    raise RuntimeError(f"CUDA_VISIBLE_DEVICES entry {chosen!r} matches no NVML device")


def query_device(ordinal: int = 0) -> NvmlDevice:
    """Identity of CUDA device ``ordinal`` (as the CUDA runtime numbers it)."""
    nv = _nvml()
    index = visible_nvml_index(ordinal)
    handle = nv.nvmlDeviceGetHandleByIndex(index)
    major, minor = nv.nvmlDeviceGetCudaComputeCapability(handle)
    cuda = nv.nvmlSystemGetCudaDriverVersion()
    return NvmlDevice(
        index=index,
        name=_text(nv.nvmlDeviceGetName(handle)),
        uuid=_text(nv.nvmlDeviceGetUUID(handle)),
        compute_capability=f"{major}.{minor}",
        driver_version=_text(nv.nvmlSystemGetDriverVersion()),
        cuda_driver_version=f"{cuda // 1000}.{(cuda % 1000) // 10}",
        memory_bytes=int(nv.nvmlDeviceGetMemoryInfo(handle).total),
        max_sm_clock_mhz=int(nv.nvmlDeviceGetMaxClockInfo(handle, nv.NVML_CLOCK_SM)),
        max_mem_clock_mhz=int(nv.nvmlDeviceGetMaxClockInfo(handle, nv.NVML_CLOCK_MEM)),
    )


def read_clocks(index: int) -> dict[str, Any]:
    """Current SM/memory clocks, temperature, power and throttle reasons (best effort)."""
    out: dict[str, Any] = {}
    try:
        nv = _nvml()
        handle = nv.nvmlDeviceGetHandleByIndex(index)
        out["sm_clock_mhz"] = int(nv.nvmlDeviceGetClockInfo(handle, nv.NVML_CLOCK_SM))
        out["mem_clock_mhz"] = int(nv.nvmlDeviceGetClockInfo(handle, nv.NVML_CLOCK_MEM))
        out["temperature_c"] = int(nv.nvmlDeviceGetTemperature(handle, nv.NVML_TEMPERATURE_GPU))
        out["power_w"] = round(nv.nvmlDeviceGetPowerUsage(handle) / 1000.0, 1)
        out["throttle_reasons"] = int(nv.nvmlDeviceGetCurrentClocksEventReasons(handle))
    except Exception as exc:  # NVML is advisory here: a missing counter must not fail a trial
        logger.debug("NVML clock read failed: %s", exc)
    return out


def arch_for(compute_capability: str, wants_arch_specific: bool = False) -> str:
    """``"9.0"`` → ``"sm_90"``; ``sm_90a`` when a kernel needs wgmma/setmaxnreg."""
    arch = "sm_" + compute_capability.replace(".", "")
    return arch + "a" if wants_arch_specific and compute_capability.startswith("9") else arch
