"""The "replay" implementation of a kernel: measurements recorded on real GPUs.

A replay worker serves a kernel's recorded landscapes (Kernel Tuner cache files) without a GPU,
for the GPU models and problems that were recorded. A kernel may have only this implementation
(kernels/recorded/: a landscape is all we have of it) or have it beside its code (the catalogue
kernels' own kernels/<name>/landscapes/).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class Recordings:
    """Attributes:
    paths: the landscape files.
    problems: the problem of each landscape (normalized problem dicts, without repeats).
    gpu_models: slugs of the GPU models recorded: where a replay worker can serve the kernel.
    """

    paths: tuple[Path, ...] = field(compare=False)
    problems: tuple[Mapping[str, Any], ...]
    gpu_models: frozenset[str]

    def fingerprint(self) -> bytes:
        """The recordings' file names: for a kernel with no code of its own they are its source."""
        return b"".join(path.name.encode() for path in self.paths)

    def covers(self, problem: Mapping[str, Any]) -> bool:
        """Whether ``problem`` (normalized) was recorded."""
        return dict(problem) in [dict(p) for p in self.problems]
