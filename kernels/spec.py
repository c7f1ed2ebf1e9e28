"""What a tunable kernel is: its search space, its problem signature, and how to run it.

A :class:`KernelSpec` is pure data plus small functions; the registry validates every spec at load
time so a broken kernel fails the test suite, not a worker at 3 a.m.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kernelfarm.core.errors import InvalidInput
from kernelfarm.core.space import SearchSpace

if TYPE_CHECKING:
    from kernelfarm.kernels.cuda_kernel import CudaKernel


@dataclass(frozen=True)
class ProblemParam:
    """One dimension of a kernel's problem (``M``, ``dtype``, ...)."""

    name: str
    kind: str = "int"  # "int" or "str"
    choices: tuple[Any, ...] | None = None
    minimum: int = 1
    maximum: int = 1 << 20

    def normalize(self, value: Any) -> Any:
        if self.kind == "int":
            if isinstance(value, bool) or not isinstance(value, int):
                raise InvalidInput(f"problem.{self.name} must be an integer, got {value!r}")
            if not self.minimum <= value <= self.maximum:
                raise InvalidInput(f"problem.{self.name}={value} is outside [{self.minimum}, {self.maximum}]")
        elif not isinstance(value, str):
            raise InvalidInput(f"problem.{self.name} must be a string, got {value!r}")
        if self.choices is not None and value not in self.choices:
            raise InvalidInput(f"problem.{self.name}={value!r} is not one of {list(self.choices)}")
        return value


@dataclass(frozen=True)
class KernelSpec:
    name: str
    version: int
    description: str
    space: SearchSpace
    problem_params: tuple[ProblemParam, ...]
    default_problem: Mapping[str, Any]
    backends: frozenset[str]
    source_path: Path | None = None
    cuda: CudaKernel | None = None
    # Replay-only kernels can only be run for the problems that were recorded.
    recorded_problems: tuple[Mapping[str, Any], ...] = ()
    recordings: tuple[Path, ...] = field(default=(), compare=False)
    # GPU models (slugs) with a recording: where a replay worker can serve this kernel.
    recorded_gpu_models: frozenset[str] = frozenset()

    @property
    def source_text(self) -> str:
        return self.source_path.read_text() if self.source_path else ""

    @property
    def source_hash(self) -> str:
        """Hash of everything a measurement depends on in the spec: source, space and version."""
        digest = hashlib.sha256()
        digest.update(self.source_text.encode())
        digest.update(json.dumps(self.space.to_dict(), sort_keys=True).encode())
        digest.update(str(self.version).encode())
        if self.source_path is None:  # replay-only: the recordings are the "source"
            for path in self.recordings:
                digest.update(path.name.encode())
        return digest.hexdigest()[:16]

    def normalize_problem(self, problem: Mapping[str, Any] | None) -> dict[str, Any]:
        """Fill defaults, check names and types.

        Raises:
            InvalidInput: unknown or ill-typed problem values, or a problem never recorded for a
                replay-only kernel.
        """
        given = dict(problem or {})
        known = {p.name for p in self.problem_params}
        unknown = set(given) - known
        if unknown:
            raise InvalidInput(f"kernel {self.name!r} has no problem parameters {sorted(unknown)}")
        out = {}
        for param in self.problem_params:
            out[param.name] = param.normalize(given.get(param.name, self.default_problem.get(param.name)))
        replay_only = self.recorded_problems and "cuda" not in self.backends
        if replay_only and out not in [dict(p) for p in self.recorded_problems]:
            raise InvalidInput(
                f"kernel {self.name!r} is replay-only; recorded problems: {list(self.recorded_problems)}"
            )
        return out

    def problem_key(self, problem: Mapping[str, Any]) -> str:
        return ",".join(f"{p.name}={problem[p.name]}" for p in self.problem_params)

    def problem_distance(self, a: Mapping[str, Any], b: Mapping[str, Any]) -> float:
        """Distance between two problems for the 'nearest problem' fallback: sum of |log2 ratio| of
        the integer dimensions; infinite when a non-integer dimension (dtype, layout) differs."""
        total = 0.0
        for p in self.problem_params:
            x, y = a.get(p.name), b.get(p.name)
            if p.kind == "int" and isinstance(x, int) and isinstance(y, int) and x > 0 and y > 0:
                total += abs(math.log2(x / y))
            elif x != y:
                return math.inf
        return total
