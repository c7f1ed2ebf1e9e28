"""The CUDA Toolkit's headers for NVRTC: where they are on this host, and what identifies them.

NVRTC has no include directory of its own (NVRTC 13.0: ``#include <cuda_fp16.h>`` fails with "no
directories in search list"), so a kernel using ``__half``, ``__nv_bfloat16``, WMMA, cooperative groups or
``cuda::std`` needs the toolkit's. Found the way CuPy finds them (cuda.pathfinder): the runtime's headers
(``cuda_fp16.h``, ``cuda_bf16.h``, ``cuda_fp8.h``, ``cuda_pipeline.h``), the compiler's (``crt/``, which
``mma.h`` includes) and CCCL's (``cuda/std/...``, ``nv/target``, which cooperative groups include).

The cubin cache key takes the headers' ``fingerprint`` (their bytes), not their folders: a cubin is reused
exactly while the headers it may have read are the same, wherever they are installed, and the key and the
recorded options name no install location. For the same reason NVRTC's log names them by role, not path.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from kernelfarm.core.errors import InvalidInput

logger = logging.getLogger(__name__)

# cuda.pathfinder's names for the header folders, in search order: the runtime's, the compiler's, CCCL's.
# On an H200 node (CUDA 13.0): a wheel's nvidia/cu13/include (no crt/), the toolkit's include, its cccl/.
PATHFINDER_LIBRARIES = ("cudart", "nvcc", "cccl")
# How a compile log and the recorded options name the i-th folder.
PLACEHOLDER = "<cuda-include-{}>"


@dataclass(frozen=True)
class ToolkitHeaders:
    """Folders NVRTC searches for ``<name>`` includes, and a digest of every file in them."""

    dirs: tuple[str, ...]
    fingerprint: str

    @classmethod
    def from_dirs(cls, dirs: Sequence[str | Path]) -> ToolkitHeaders:
        """The headers in ``dirs`` (absolute, in search order), digested.

        Raises:
            NotADirectoryError: one of them is not a folder.
        """
        absolute = tuple(str(Path(d).resolve()) for d in dirs)
        for folder in absolute:
            if not Path(folder).is_dir():
                raise NotADirectoryError(f"CUDA include folder {folder} does not exist")
        return cls(absolute, _digest(absolute))

    @property
    def options(self) -> tuple[str, ...]:
        """NVRTC's ``--include-path`` options, with the real folders."""
        return tuple(f"--include-path={folder}" for folder in self.dirs)

    @property
    def recorded_options(self) -> tuple[str, ...]:
        """The same options as provenance records them: by role, so they name no host's layout."""
        return tuple(f"--include-path={PLACEHOLDER.format(i)}" for i in range(len(self.dirs)))

    def scrub(self, log: str) -> str:
        """``log`` with each folder replaced by its placeholder: a compile log is a trial's stored
        failure, shown to every reader of the job, and one host's log reads the same as another's."""
        # Longest first: a folder inside another (the toolkit's include and its cccl/) keeps its own name.
        for i, folder in sorted(enumerate(self.dirs), key=lambda item: -len(item[1])):
            log = log.replace(folder, PLACEHOLDER.format(i))
        return log


def _digest(dirs: tuple[str, ...]) -> str:
    """SHA-256 over every file under ``dirs``: its folder's position, its path inside, its bytes.

    0.35-0.83 s for an H200 node's 3,845 files (54 MB), once per worker start (docs/benchmarks/GPU.md)."""
    digest = hashlib.sha256()
    for i, folder in enumerate(dirs):
        for root, subdirs, files in os.walk(folder):
            subdirs.sort()
            for name in sorted(files):
                path = Path(root, name)
                digest.update(f"\0{i}\0{path.relative_to(folder)}\0".encode())
                # A file that cannot be read (a dangling link) adds nothing: NVRTC cannot read it either.
                with contextlib.suppress(OSError):
                    digest.update(path.read_bytes())
    return digest.hexdigest()[:32]


def find_toolkit_headers(configured: Sequence[str | Path] | None = None) -> ToolkitHeaders | None:
    """This host's CUDA headers: ``configured`` (Settings.cuda_include_dirs) if given, else the folders
    cuda.pathfinder finds for :data:`PATHFINDER_LIBRARIES` (duplicates dropped). None, with a warning,
    when there are none: kernels then compile as before, and one that includes a toolkit header fails
    with NVRTC's "cannot open source file".

    Raises:
        InvalidInput: a configured folder does not exist (a misconfigured worker says so as it starts,
            as a message, not a traceback: kernelfarm/cli.py).
    """
    if configured:
        try:
            return ToolkitHeaders.from_dirs(configured)
        except NotADirectoryError as exc:
            raise InvalidInput(f"KERNELFARM_CUDA_INCLUDE_DIRS: {exc}") from None
    found: list[str] = []
    try:
        import cuda.pathfinder as pathfinder
    except ImportError:
        logger.warning("cuda.pathfinder is not installed: NVRTC gets no CUDA include folder")
        return None
    for library in PATHFINDER_LIBRARIES:
        try:
            folder = pathfinder.find_nvidia_header_directory(library)
        except RuntimeError:  # a library this version of pathfinder does not know
            folder = None
        if folder is not None and (resolved := str(Path(folder).resolve())) not in found:
            found.append(resolved)
    if not found:
        logger.warning("no CUDA headers found (cuda.pathfinder, CUDA_PATH, CUDA_HOME): NVRTC gets no include folder")
        return None
    return ToolkitHeaders.from_dirs(found)
