"""A kernel as the store sees it: its identity and the geometry of its problems, nothing about running it.

core sits below kernels (kernels import core, never the reverse), yet the store has to record
kernels and compare their problems. It asks for this protocol instead of
:class:`kernelfarm.kernels.spec.KernelSpec`; a spec satisfies it structurally, with no import in
either direction. Keep it to what the store reads: how a kernel is run (its implementations per
backend, launch shapes, references) is no business of the store and stays out.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from kernelfarm.core.space import SearchSpace


class StoredKernel(Protocol):
    """What :mod:`kernelfarm.core.store` reads of a kernel.

    The members are read-only properties so that frozen dataclasses (the kernel specs) match.
    """

    @property
    def name(self) -> str: ...

    @property
    def version(self) -> int: ...

    @property
    def description(self) -> str: ...

    @property
    def space(self) -> SearchSpace: ...

    @property
    def source_hash(self) -> str:
        """Hash of everything a measurement depends on; trials of another hash are stale."""
        ...

    def problem_key(self, problem: Mapping[str, Any]) -> str:
        """Canonical text of a normalized problem: equal problems give equal keys."""
        ...

    def problem_distance(self, a: Mapping[str, Any], b: Mapping[str, Any]) -> float:
        """How far apart two problems are, for the nearest-problem fallback; ``math.inf`` when they
        differ in a dimension that has no distance (a dtype, a layout)."""
        ...
