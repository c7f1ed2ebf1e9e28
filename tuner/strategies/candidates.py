"""The valid configs of a space as a table the optimizers can index fast.

Every strategy is rebuilt from history on each coordinator step, so mapping history configs to
rows must not cost a string key per candidate (18k keys cost ~30 ms). Rows are identified by a
mixed-radix integer code of their value indices instead: ``SearchSpace.valid_indices`` is in
lexicographic order, so the codes are sorted and membership is one ``np.searchsorted``.

The table is cached on the space object (like ``valid_indices`` itself), per context.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from kernelfarm.core.space import Config, SearchSpace
from kernelfarm.tuner.strategies.encoding import encode


@dataclass(frozen=True)
class CandidateTable:
    """Valid configs of one (space, context): value indices, sorted codes and model features."""

    indices: np.ndarray  # (N, P) int32 value indices, lexicographic
    codes: np.ndarray  # (N,) int64 mixed-radix codes, ascending
    radix: np.ndarray  # (P,) int64 place value of each parameter
    sizes: np.ndarray  # (P,) int64 number of values of each parameter
    features: np.ndarray  # (N, D) float64 in [0, 1] (see encoding.py)
    lookup: tuple[dict[Any, int], ...]  # per parameter: value -> index
    plain_columns: int = -1  # features[:, :plain_columns]: without the alignment columns (-1: all)

    def model_features(self, alignment: bool) -> np.ndarray:
        """The features a model uses: all of them, or (``alignment`` False, an ablation) the
        plain columns only, as a view."""
        if alignment or self.plain_columns < 0:
            return self.features
        return self.features[:, : self.plain_columns]

    def __len__(self) -> int:
        return len(self.codes)

    def index_rows(self, configs: Iterable[Mapping[str, Any]], names: Sequence[str]) -> np.ndarray:
        """Value-index rows of ``configs``; a row is all -1 when a value is not in the space."""
        out = []
        for config in configs:
            row = []
            for table, name in zip(self.lookup, names, strict=True):
                value = config.get(name)
                usable = _hashable(value) and not isinstance(value, bool)
                index = table.get(value, -1) if usable else -1
                row.append(index)
            out.append(row if min(row, default=0) >= 0 else [-1] * len(row))
        return np.array(out, dtype=np.int64).reshape(-1, len(names))

    def code_of(self, index_rows: np.ndarray) -> np.ndarray:
        """Codes of value-index rows (-1 for rows marked invalid)."""
        if len(index_rows) == 0:
            return np.zeros(0, dtype=np.int64)
        codes = index_rows.astype(np.int64) @ self.radix
        return np.where(index_rows[:, 0] < 0, -1, codes)

    def position(self, codes: np.ndarray) -> np.ndarray:
        """Row of each code in the table, or -1 when the code is not a valid config."""
        if len(codes) == 0 or len(self.codes) == 0:
            return np.full(len(codes), -1, dtype=np.int64)
        where = np.searchsorted(self.codes, codes)
        where = np.minimum(where, len(self.codes) - 1)
        return np.where(self.codes[where] == codes, where, -1).astype(np.int64)

    def rows_of(self, configs: Sequence[Mapping[str, Any]], names: Sequence[str]) -> np.ndarray:
        """Table row of each config, -1 for configs that are not valid members."""
        return self.position(self.code_of(self.index_rows(configs, names)))

    def neighbours(self, rows: np.ndarray) -> np.ndarray:
        """Table rows that differ from one of ``rows`` in exactly one parameter (valid ones only)."""
        if len(rows) == 0:
            return np.zeros(0, dtype=np.int64)
        base = self.indices[rows].astype(np.int64)  # (r, P)
        codes = self.codes[rows]
        moves = []
        for j, size in enumerate(self.sizes.tolist()):
            if size < 2:
                continue
            values = np.arange(size, dtype=np.int64)
            delta = (values[None, :] - base[:, j : j + 1]) * self.radix[j]  # (r, size)
            moved = (codes[:, None] + delta)[values[None, :] != base[:, j : j + 1]]
            moves.append(moved)
        found = self.position(np.unique(np.concatenate(moves))) if moves else np.zeros(0, dtype=np.int64)
        return found[found >= 0]


def switch_pairs(table: CandidateTable, rows: np.ndarray, tried: np.ndarray | None = None) -> np.ndarray:
    """Table rows that differ from one of ``rows`` in exactly two two-valued parameters (valid
    ones only): both switches flipped at once.

    ``tried`` (table rows already measured): keep only the pairs whose two single flips are both
    tried or not valid configs, i.e. where flipping either switch alone is known not to pay; the
    pair is then the one move left across that cliff, not a rival of the single flips."""
    binary = [j for j, size in enumerate(table.sizes.tolist()) if size == 2]
    if len(rows) == 0 or len(binary) < 2:
        return np.zeros(0, dtype=np.int64)
    base = table.indices[rows].astype(np.int64)
    codes = table.codes[rows]
    # a flip of a two-valued parameter moves its index 0 <-> 1
    flip = {j: (1 - 2 * base[:, j]) * table.radix[j] for j in binary}
    if tried is not None:
        known = {j: _tried_or_invalid(table, codes + flip[j], tried) for j in binary}
    moves = []
    for a, j in enumerate(binary):
        for k in binary[a + 1 :]:
            pair = codes + flip[j] + flip[k]
            moves.append(pair if tried is None else pair[known[j] & known[k]])
    found = table.position(np.unique(np.concatenate(moves)))
    return found[found >= 0]


def _tried_or_invalid(table: CandidateTable, codes: np.ndarray, tried: np.ndarray) -> np.ndarray:
    position = table.position(codes)
    return (position < 0) | np.isin(position, tried)


def candidate_table(space: SearchSpace, context: Mapping[str, Any] | None = None) -> CandidateTable:
    """The (cached) candidate table of ``space`` for ``context``."""
    key = tuple(sorted((context or {}).items()))
    cache: dict[Any, CandidateTable] = space.__dict__.setdefault("_candidate_tables", {})
    if key not in cache:
        cache[key] = _build(space, dict(context or {}))
    return cache[key]


def _build(space: SearchSpace, context: dict[str, Any]) -> CandidateTable:
    indices = space.valid_indices(context)
    sizes = np.array([len(p.values) for p in space.parameters], dtype=np.int64)
    radix = np.ones(len(sizes), dtype=np.int64)
    for j in range(len(sizes) - 2, -1, -1):
        radix[j] = radix[j + 1] * sizes[j + 1]
    codes = indices.astype(np.int64) @ radix
    order = np.argsort(codes, kind="stable")
    if not np.all(order == np.arange(len(order))):  # valid_indices is documented sorted; stay safe
        indices, codes = indices[order], codes[order]
    lookup = tuple({v: i for i, v in enumerate(p.values)} for p in space.parameters)
    features, plain = encode(space, indices)
    return CandidateTable(indices, codes, radix, sizes, features, lookup, plain)


def configs_at(space: SearchSpace, table: CandidateTable, rows: Iterable[int]) -> list[Config]:
    """Configs of table rows, as plain Python values (numpy scalars break JSON and SQL)."""
    return [space.config_at(table.indices[int(r)]) for r in rows]


def _hashable(value: Any) -> bool:
    try:
        hash(value)
    except TypeError:
        return False
    return True
