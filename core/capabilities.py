"""What a GPU worker can run beyond the catalogue, as strings a kernel can require.

- ``plugin:<distribution>==<version>``: the worker has that kernel plugin installed, at that version
  (plugins come through the ``kernelfarm.kernels`` entry-point group);
- ``uploaded-python``: the worker was started with the opt-in to run uploaded Python.

Workers register theirs (gpu_workers.capabilities) and also consume one extra queue per
capability, so a trial that needs one is sent where only capable workers take it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

UPLOADED_PYTHON = "uploaded-python"


def plugin_capability(distribution: str, version: str) -> str:
    return f"plugin:{distribution}=={version}"


def routed_model(gpu_model: str, requires: Iterable[str]) -> str:
    """The route of trials that need ``requires`` on ``gpu_model``: ``queue_for`` of it is
    :func:`capability_queue` of the model's queue."""
    needed = sorted(requires)
    return f"{gpu_model}{_suffix(needed)}" if needed else gpu_model


def _suffix(needed: list[str]) -> str:
    return ".needs." + "+".join(re.sub(r"[^A-Za-z0-9_.=\-]+", "-", item) for item in needed)


def capability_queue(base_queue: str, requires: Iterable[str]) -> str:
    """The queue of trials that need ``requires`` (sorted, so every process names it alike); the
    model's own queue when nothing is required."""
    needed = sorted(requires)
    return f"{base_queue}{_suffix(needed)}" if needed else base_queue


def capability_queues(base_queue: str, capabilities: Iterable[str]) -> list[str]:
    """The extra queues a worker with ``capabilities`` consumes: one per capability (a kernel that
    needs several is rare; its queue is consumed by workers that list all of them, see
    :func:`capability_queue`)."""
    return [capability_queue(base_queue, [capability]) for capability in sorted(set(capabilities))]


def missing(requires: Iterable[str], capabilities: Iterable[str]) -> list[str]:
    have = set(capabilities)
    return sorted(item for item in requires if item not in have)
