"""What this worker can run beyond the catalogue: its kernel plugins, and uploaded Python when it was
started with the opt-in (``kernelfarm worker --allow-uploaded-python``). Registered with the worker
and turned into the extra queues it consumes (core/capabilities.py)."""

from __future__ import annotations

from kernelfarm.core.capabilities import UPLOADED_PYTHON
from kernelfarm.core.settings import Settings
from kernelfarm.kernels.plugins import plugin_capabilities


def worker_capabilities(settings: Settings) -> list[str]:
    capabilities = plugin_capabilities()
    if settings.worker_allow_uploaded_python:
        capabilities.append(UPLOADED_PYTHON)
    return sorted(capabilities)
