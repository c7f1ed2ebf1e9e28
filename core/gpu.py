"""GPU model names → queue names. A worker derives its queue from the device's real name."""

from __future__ import annotations

import re

QUEUE_PREFIX = "gpu."


def model_slug(device_name: str) -> str:
    """``"NVIDIA H100 80GB HBM3"`` → ``"nvidia-h100-80gb-hbm3"``: stable, URL- and queue-safe."""
    slug = re.sub(r"[^a-z0-9]+", "-", device_name.strip().lower()).strip("-")
    if not slug:
        raise ValueError(f"cannot derive a GPU model from device name {device_name!r}")
    return slug


def queue_for(gpu_model: str) -> str:
    return f"{QUEUE_PREFIX}{gpu_model}"


def architecture_of(compute_capability: str | None) -> str | None:
    """``"9.0"`` → ``"sm_90"``; the fallback level of the best-config lookup."""
    if not compute_capability:
        return None
    return "sm_" + compute_capability.replace(".", "")
