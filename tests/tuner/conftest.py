"""Small synthetic spaces and objectives shared by the tuner tests (fast: no landscapes)."""

from __future__ import annotations

import math
from collections.abc import Callable

from kernelfarm.core.space import Config, Parameter, SearchSpace
from kernelfarm.core.states import FailureKind
from kernelfarm.tuner.strategies.base import Observation, Optimizer

# block sizes (powers of two), an irregular ordered parameter, a string one, a context constraint
SPACE = SearchSpace(
    parameters=(
        Parameter("bx", (1, 2, 4, 8, 16, 32)),
        Parameter("by", (1, 2, 4, 8)),
        Parameter("tile", (1, 2, 3, 5, 8)),
        Parameter("layout", ("row", "col", "tiled")),
        Parameter("fixed", (7,)),
    ),
    constraints=("bx * by <= 128", "tile <= n"),
    context_names=frozenset({"n"}),
)
CONTEXT = {"n": 5}
TINY = SearchSpace(parameters=(Parameter("a", (1, 2, 3)), Parameter("b", (10, 20))), constraints=("a + b != 22",))


def objective(config: Config) -> float | None:
    """A smooth-ish synthetic time with a failing corner (big blocks with big tiles)."""
    bx, by, tile = (float(config[k]) for k in ("bx", "by", "tile"))
    if bx * by * tile >= 64:
        return None
    layout = {"row": 1.0, "col": 1.3, "tiled": 0.9}[str(config["layout"])]
    return layout * (1 + (math.log2(bx) - 3) ** 2 + (math.log2(by) - 1) ** 2 + 0.3 * (tile - 3) ** 2)


def drive(
    strategy: type[Optimizer],
    space: SearchSpace,
    context: dict[str, int],
    steps: int,
    batch: int,
    seed: int = 0,
    options: dict[str, object] | None = None,
    check: Callable[[list[Config], list[Observation]], None] | None = None,
) -> list[Observation]:
    """Run ask/evaluate for ``steps`` batches; ``check`` sees each batch with the history before it."""
    history: list[Observation] = []
    for _ in range(steps):
        configs = strategy.from_history(space, context, history, seed, options).ask(batch)
        if check:
            check(configs, history)
        if not configs:
            break
        for config in configs:
            value = objective(config) if "layout" in config else float(sum(config.values()))  # type: ignore[arg-type]
            failure = FailureKind.LAUNCH if value is None else None
            history.append(Observation(config, value, failure))
    return history
