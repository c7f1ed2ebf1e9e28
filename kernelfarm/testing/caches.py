"""Every cache that can make a GPU benchmark's compiles fast, in one place, so "cold" means cold.

- the farm's cubin cache (``Settings.cuda_cache``, default ``<tmp>/kernelfarm-cuda``);
- the CUDA compute cache (``~/.nv/ComputeCache`` unless ``CUDA_CACHE_PATH``), which the driver's
  JIT and NVRTC 13 answer from across processes;
- CuPy's kernel cache (``~/.cupy/kernel_cache`` unless ``CUPY_CACHE_DIR``): the farm's input,
  reference and check kernels, and every kernel Kernel Tuner compiles through CuPy;
- Triton's cache (``~/.triton/cache`` unless ``TRITON_CACHE_DIR``).

A benchmark points the last three at folders under one root (its processes and the farm's, which
inherit the environment) and empties them and the cubin cache for a cold run; a warm run keeps what
the run before it left. Call :func:`use` before anything initializes CUDA in the process.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

VARIABLES = {"CUDA_CACHE_PATH": "compute-cache", "CUPY_CACHE_DIR": "cupy", "TRITON_CACHE_DIR": "triton"}


def use(mode: str, root: Path, cubin_cache: Path) -> dict[str, str]:
    """Point this process's (and its children's) caches at ``root``; for ``mode`` "cold" empty them
    and the farm's ``cubin_cache`` first. Returns what was set, for the report."""
    if mode not in ("cold", "warm"):
        raise ValueError(f"cache mode must be cold or warm, not {mode!r}")
    if mode == "cold":
        clear(root, cubin_cache)
    os.environ["CUDA_CACHE_DISABLE"] = "0"  # caching on: a cold run empties the caches instead
    settings = {}
    for variable, folder in VARIABLES.items():
        path = root / folder
        path.mkdir(parents=True, exist_ok=True)
        os.environ[variable] = settings[variable] = str(path)
    return settings | {"mode": mode, "cubin_cache": str(cubin_cache)}


def clear(root: Path, cubin_cache: Path | None) -> None:
    """Empty every cache: the folders under ``root`` and the farm's cubin cache (None: keep it, for a
    tool that never reads it)."""
    for folder in VARIABLES.values():
        shutil.rmtree(root / folder, ignore_errors=True)
    if cubin_cache is not None:
        shutil.rmtree(cubin_cache, ignore_errors=True)


def sizes(root: Path, cubin_cache: Path) -> dict[str, int]:
    """Files in each cache: evidence of which ones a run filled."""
    folders = {name: root / folder for name, folder in VARIABLES.items()} | {"cubin_cache": cubin_cache}
    return {name: sum(1 for p in path.rglob("*") if p.is_file()) if path.is_dir() else 0
            for name, path in folders.items()}  # fmt: skip
