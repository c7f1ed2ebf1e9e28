"""Kernels known only through recorded landscapes (Kernel Tuner cache files in kernels/recorded/).

The replay backend serves their measurements; nothing is compiled. Recordings of the same kernel
on several GPUs merge into one spec whose space is the union of what was recorded.
"""

from __future__ import annotations

from pathlib import Path

from kernelfarm.core.gpu import model_slug
from kernelfarm.core.landscape import Landscape, load_landscape
from kernelfarm.core.space import Parameter, SearchSpace
from kernelfarm.kernels.recordings import Recordings
from kernelfarm.kernels.spec import KernelSpec, ProblemParam

RECORDED_DIR = Path(__file__).parent / "recorded"
_PROBLEM_NAMES = ("size_x", "size_y", "size_z")


def recorded_specs(directory: Path = RECORDED_DIR) -> list[KernelSpec]:
    by_kernel: dict[str, list[Landscape]] = {}
    for path in sorted(directory.glob("*.json*")):
        landscape = load_landscape(path)
        by_kernel.setdefault(landscape.kernel_name, []).append(landscape)
    return [_merge(name, landscapes) for name, landscapes in sorted(by_kernel.items())]


def problem_of(landscape: Landscape) -> dict[str, int]:
    return dict(zip(_PROBLEM_NAMES, landscape.problem_size, strict=False))


def _merge(name: str, landscapes: list[Landscape]) -> KernelSpec:
    first = landscapes[0]
    parameters = []
    for param in first.space.parameters:
        values: list = []
        for landscape in landscapes:
            other = {p.name: p for p in landscape.space.parameters}[param.name]
            values.extend(v for v in other.values if v not in values)
        parameters.append(Parameter(param.name, tuple(values)))
    allowed = frozenset().union(*(landscape.entries.keys() for landscape in landscapes))
    dims = max(len(landscape.problem_size) for landscape in landscapes)
    problems = tuple(problem_of(landscape) for landscape in landscapes)
    return KernelSpec(
        name=name,
        version=1,
        description=(
            f"{name}: recorded landscape(s) replayed from Kernel Tuner cache files "
            f"({', '.join(sorted({landscape.device_name for landscape in landscapes}))}); "
            "measurements are replayed, not taken"
        ),
        space=SearchSpace(tuple(parameters), allowed_keys=allowed),
        problem_params=tuple(ProblemParam(n, maximum=1 << 40) for n in _PROBLEM_NAMES[:dims]),
        default_problem=problems[0],
        impls={
            "replay": Recordings(
                paths=tuple(landscape.path for landscape in landscapes),
                problems=problems,
                gpu_models=frozenset(model_slug(landscape.device_name) for landscape in landscapes),
            )
        },
    )
