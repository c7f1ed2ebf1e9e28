"""GPU model names → queue names. A worker derives its queue from the device's real name."""

from __future__ import annotations

import re

QUEUE_PREFIX = "gpu."
# The longest GPU model the database stores (jobs, workers, profiles: String(128) in core/models.py).
MAX_GPU_MODEL_LENGTH = 128


def model_slug(device_name: str) -> str:
    """``"NVIDIA H100 80GB HBM3"`` → ``"nvidia-h100-80gb-hbm3"``: stable, URL- and queue-safe.

    Raises:
        ValueError: no letter or digit to name a model by, or a slug longer than the database keeps. A
            slug can be longer than its name: lower case may take more characters ("İ" is "i" and a
            combining dot, so 70 of them made 139), and every run of other characters becomes "-".
    """
    slug = re.sub(r"[^a-z0-9]+", "-", device_name.strip().lower()).strip("-")
    if not slug:
        raise ValueError(f"cannot derive a GPU model from device name {device_name!r}")
    if len(slug) > MAX_GPU_MODEL_LENGTH:
        raise ValueError(
            f"the GPU model derived from this device name has {len(slug)} characters; at most "
            f"{MAX_GPU_MODEL_LENGTH} are kept"
        )
    return slug


def queue_for(gpu_model: str) -> str:
    return f"{QUEUE_PREFIX}{gpu_model}"


def architecture_of(compute_capability: str | None) -> str | None:
    """``"9.0"`` → ``"sm_90"``; the fallback level of the best-config lookup."""
    if not compute_capability:
        return None
    return "sm_" + compute_capability.replace(".", "")
