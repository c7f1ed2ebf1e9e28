"""Related landscapes for the warm-start experiment: "the same kernel on another size or GPU".

The shared landscapes hold one recording per kernel, so the source of a prior is made from the
target itself: log times shifted by a smooth random function of the config (a random linear
function of its encoded features: some parameters matter more or less on the other GPU) plus
independent noise, scaled to ``smooth`` and ``noise`` standard deviations of the target's own log
times. Failures stay where they are (compile failures do not depend on the problem size).
``shuffled`` is the unrelated control: the same times assigned to random configs.
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np

from kernelfarm.core.landscape import Landscape, Recording
from kernelfarm.tuner.strategies.candidates import candidate_table


def distorted(landscape: Landscape, smooth: float, noise: float, seed: int) -> Landscape:
    rng = np.random.default_rng(seed)
    table = candidate_table(landscape.space)
    keys = list(landscape.entries)
    rows = table.rows_of([landscape.space.config_from_key(k) for k in keys], landscape.space.names)
    features = table.model_features(False)[rows]  # the plain columns: the priors as before alignment columns existed
    direction = rng.standard_normal(features.shape[1])
    shift = features @ direction
    shift = (shift - shift.mean()) / (shift.std() or 1.0)
    logs = np.array([math.log(r.mean_ms) for r in landscape.entries.values() if r.mean_ms is not None])
    scale = float(logs.std())
    entries = {}
    for i, key in enumerate(keys):
        recording = landscape.entries[key]
        if recording.mean_ms is None:
            entries[key] = recording
            continue
        factor = math.exp(scale * (smooth * shift[i] + noise * rng.standard_normal()))
        entries[key] = _scaled(recording, factor)
    return replace(landscape, entries=entries)


def shuffled(landscape: Landscape, seed: int) -> Landscape:
    rng = np.random.default_rng(seed)
    keys = list(landscape.entries)
    values = [landscape.entries[k] for k in keys]
    order = rng.permutation(len(keys))
    return replace(landscape, entries={k: values[j] for k, j in zip(keys, order.tolist(), strict=True)})


def _scaled(recording: Recording, factor: float) -> Recording:
    assert recording.time_ms is not None and recording.mean_ms is not None
    return replace(
        recording,
        time_ms=recording.time_ms * factor,
        mean_ms=recording.mean_ms * factor,
        times_ms=tuple(t * factor for t in recording.times_ms),
    )
