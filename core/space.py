"""Discrete search spaces: parameters, constraints, enumeration of the valid set, canonical keys.

A config is a mapping from parameter name to one of that parameter's values. Its canonical key is
Kernel Tuner's cache key: the values joined by commas in parameter order (``"16,8,2"``), which makes
import and export of Kernel Tuner cache files trivial.

The valid set is computed once per (space, context) as an ``int32`` matrix of value *indices*
(one row per valid config, one column per parameter): optimizers work on that matrix directly.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import numpy as np

from kernelfarm.core.constraints import Constraint, parse_constraint
from kernelfarm.core.errors import InvalidInput
from kernelfarm.core.key_lengths import CONFIG_KEY_BYTES, CONFIG_KEY_LENGTH

Value = int | float | str
Config = dict[str, Value]

MAX_CARTESIAN = 200_000_000
MAX_VALID = 2_000_000
_CHUNK = 1 << 20


@dataclass(frozen=True)
class Parameter:
    name: str
    values: tuple[Value, ...]

    def __post_init__(self) -> None:
        if not self.name.isidentifier():
            raise InvalidInput(f"parameter name {self.name!r} is not an identifier")
        if not self.values:
            raise InvalidInput(f"parameter {self.name!r} has no values")
        if len(set(self.values)) != len(self.values):
            raise InvalidInput(f"parameter {self.name!r} lists a value twice")
        for value in self.values:
            if isinstance(value, bool) or not isinstance(value, int | float | str):
                raise InvalidInput(f"parameter {self.name!r}: values must be numbers or strings")
            if isinstance(value, float) and not math.isfinite(value):
                raise InvalidInput(f"parameter {self.name!r}: {value} is not a finite number")
        # A config's key is its values' text joined by commas (SearchSpace.key), stored once per job:
        # two values with one text, or a comma in one, made two configs one key, and the job hung.
        texts: dict[str, Value] = {}
        for value in self.values:
            text = str(value)
            if "," in text:
                raise InvalidInput(
                    f"parameter {self.name!r}: {value!r} holds a comma (a config key joins values by commas), "
                    "so values hold no comma"
                )
            if text in texts:
                raise InvalidInput(
                    f"parameter {self.name!r}: {texts[text]!r} and {value!r} read the same as text (a config's "
                    "key), so values must differ as text"
                )
            texts[text] = value

    @property
    def numeric(self) -> bool:
        return all(isinstance(v, int | float) for v in self.values)

    @property
    def power_of_two(self) -> bool:
        """True when every value is a positive power of two: such parameters are encoded on log2."""
        return (
            self.numeric
            and all(isinstance(v, int) and v > 0 and (v & (v - 1)) == 0 for v in self.values)
            and len(self.values) > 2
        )


@dataclass(frozen=True)
class SearchSpace:
    """Parameters (in order), constraint expressions and, optionally, an explicit allow-list.

    ``allowed_keys`` restricts the space to recorded configs (a replayed landscape contains
    exactly the configs its recording tool considered valid).
    """

    parameters: tuple[Parameter, ...]
    constraints: tuple[str, ...] = ()
    context_names: frozenset[str] = frozenset()
    allowed_keys: frozenset[str] | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        names = [p.name for p in self.parameters]
        if not names:
            raise InvalidInput("a search space needs at least one parameter")
        if len(set(names)) != len(names):
            raise InvalidInput("parameter names must be unique")
        cartesian = math.prod(len(p.values) for p in self.parameters)
        if cartesian > MAX_CARTESIAN:
            raise InvalidInput(f"search space has {cartesian} combinations; the limit is {MAX_CARTESIAN}")
        self.parsed_constraints  # parse now so a bad expression fails at construction  # noqa: B018

    # ------------------------------------------------------------------ construction helpers
    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> SearchSpace:
        params = data.get("parameters")
        if not isinstance(params, Mapping):
            raise InvalidInput("search space needs 'parameters': an object of name -> list of values")
        parameters = []
        for name, values in params.items():
            if not isinstance(values, list | tuple):
                raise InvalidInput(f"parameter {name!r}: values must be a list")
            parameters.append(Parameter(str(name), tuple(values)))
        constraints = data.get("constraints", []) or []
        if not isinstance(constraints, list | tuple) or not all(isinstance(c, str) for c in constraints):
            raise InvalidInput("'constraints' must be a list of strings")
        allowed = data.get("allowed_keys")
        return cls(
            parameters=tuple(parameters),
            constraints=tuple(constraints),
            context_names=frozenset(data.get("context_names", []) or []),
            allowed_keys=frozenset(allowed) if allowed is not None else None,
        )

    def to_dict(self, include_allowed: bool = False) -> dict[str, Any]:
        out: dict[str, Any] = {
            "parameters": {p.name: list(p.values) for p in self.parameters},
            "constraints": list(self.constraints),
        }
        if self.context_names:
            out["context_names"] = sorted(self.context_names)
        if include_allowed and self.allowed_keys is not None:
            out["allowed_keys"] = sorted(self.allowed_keys)
        return out

    def restrict(
        self, values: Mapping[str, Sequence[Value]] | None = None, constraints: Iterable[str] = ()
    ) -> SearchSpace:
        """A sub-space: fewer values for some parameters and/or extra constraints.

        Raises:
            InvalidInput: when a parameter is unknown or a value is not in the parameter's list.
        """
        values = values or {}
        unknown = set(values) - set(self.names)
        if unknown:
            raise InvalidInput(f"unknown parameters in space override: {sorted(unknown)}")
        parameters = []
        for p in self.parameters:
            if p.name in values:
                matched = [_same_value(v, p.values) for v in values[p.name]]
                extra = [v for v, m in zip(values[p.name], matched, strict=True) if m is None]
                if extra:
                    raise InvalidInput(f"parameter {p.name!r}: values {extra} are not in {list(p.values)}")
                # The parameter's own values (an int 2 given for 2.0 is 2.0), each once.
                parameters.append(Parameter(p.name, tuple(dict.fromkeys(m for m in matched if m is not None))))
            else:
                parameters.append(p)
        return SearchSpace(
            parameters=tuple(parameters),
            constraints=(*self.constraints, *constraints),
            context_names=self.context_names,
            allowed_keys=self.allowed_keys,
        )

    # ------------------------------------------------------------------ basic facts
    @property
    def names(self) -> tuple[str, ...]:
        return tuple(p.name for p in self.parameters)

    @property
    def cartesian_size(self) -> int:
        return math.prod(len(p.values) for p in self.parameters)

    @cached_property
    def parsed_constraints(self) -> tuple[Constraint, ...]:
        allowed = set(self.names) | set(self.context_names)
        return tuple(parse_constraint(text, allowed) for text in self.constraints)

    def key(self, config: Mapping[str, Value]) -> str:
        """Kernel Tuner's cache key: values in parameter order, comma-joined."""
        return ",".join(str(config[name]) for name in self.names)

    @property
    def longest_key_length(self) -> int:
        """The most characters :meth:`key` gives for any config: each parameter's longest value as
        text, and a comma between two."""
        return self._longest_key(len)

    @property
    def longest_key_bytes(self) -> int:
        """The most bytes of UTF-8 :meth:`key` gives for any config (non-ASCII values are longer in
        bytes than in characters)."""
        return self._longest_key(lambda text: len(text.encode()))

    def _longest_key(self, size: Callable[[str], int]) -> int:
        return sum(max(size(str(v)) for v in p.values) for p in self.parameters) + len(self.parameters) - 1

    def key_length_refusal(self) -> str | None:
        """Why a config of this space may have a key too long for a trial to store (core/key_lengths.py),
        or None when every key fits: a trial of such a key failed its INSERT, and so did every
        coordinator step of its job."""
        if (longest := self.longest_key_length) > CONFIG_KEY_LENGTH:
            size = f"{longest} characters long, more than the {CONFIG_KEY_LENGTH} a trial stores"
        elif (longest := self.longest_key_bytes) > CONFIG_KEY_BYTES:
            size = f"{longest} bytes of UTF-8, more than the {CONFIG_KEY_BYTES} a trial's index holds"
        else:
            return None
        widest = max(self.parameters, key=lambda p: max(len(str(v).encode()) for v in p.values))
        return (
            f"a config's key (its values, comma-joined) can be {size}; shorten the longest values (those of "
            f"{widest.name!r}) or use fewer parameters"
        )

    def config_from_key(self, key: str) -> Config:
        parts = key.split(",")
        if len(parts) != len(self.parameters):
            raise InvalidInput(f"key {key!r} does not have {len(self.parameters)} values")
        config: Config = {}
        for p, text in zip(self.parameters, parts, strict=True):
            match = [v for v in p.values if str(v) == text]
            if not match:
                raise InvalidInput(f"key {key!r}: {text!r} is not a value of {p.name!r}")
            config[p.name] = match[0]
        return config

    def config_at(self, indices: Sequence[int] | np.ndarray) -> Config:
        return {p.name: _plain(p.values[int(i)]) for p, i in zip(self.parameters, indices, strict=True)}

    def contains(self, config: Mapping[str, Any], context: Mapping[str, Any] | None = None) -> bool:
        """Is ``config`` a valid member (right names, listed values, constraints hold)?"""
        if set(config) != set(self.names):
            return False
        for p in self.parameters:
            if config[p.name] not in p.values or isinstance(config[p.name], bool):
                return False
        if self.allowed_keys is not None and self.key(config) not in self.allowed_keys:
            return False
        values = {**(context or {}), **config}
        return all(bool(c.evaluate(values)) for c in self.parsed_constraints)

    # ------------------------------------------------------------------ enumeration
    def valid_indices(self, context: Mapping[str, Any] | None = None) -> np.ndarray:
        """All valid configs as an (n_valid, n_params) int32 matrix of value indices, in
        lexicographic parameter order. Cached per context.

        Raises:
            InvalidInput: when the valid set exceeds MAX_VALID configs.
        """
        cache_key = tuple(sorted((context or {}).items()))
        cache: dict[Any, np.ndarray] = self.__dict__.setdefault("_valid_cache", {})
        if cache_key not in cache:
            cache[cache_key] = self._enumerate(dict(context or {}))
        return cache[cache_key]

    def _enumerate(self, context: dict[str, Any]) -> np.ndarray:
        missing = set(self.context_names) - set(context)
        if missing and any(c.names & missing for c in self.parsed_constraints):
            raise InvalidInput(f"problem values needed by constraints are missing: {sorted(missing)}")
        value_arrays = [np.asarray(p.values) for p in self.parameters]
        kept: list[np.ndarray] = []
        kept_count = 0
        for idx in self._unfiltered_chunks():
            chosen = idx[self._mask(idx, value_arrays, context)]
            kept_count += len(chosen)
            if kept_count > MAX_VALID:
                raise InvalidInput(f"search space has more than {MAX_VALID} valid configs")
            kept.append(chosen)
        return np.concatenate(kept) if kept else np.zeros((0, len(self.parameters)), dtype=np.int32)

    def constraints_leaving_nothing(self, context: Mapping[str, Any] | None = None) -> list[tuple[str, bool]]:
        """Each constraint that on its own holds for none of the parameters' configs, with whether it
        divides by zero in every one of them: what an "empty search space" error names, so that
        ``x % (tile - 16) == 0`` with tile restricted to 16 reads as that constraint dividing by
        zero, not as a space that happens to be empty. One more pass over the configs, for the
        error alone."""
        value_arrays = [np.asarray(p.values) for p in self.parameters]
        constraints = self.parsed_constraints
        holds_somewhere = [False] * len(constraints)
        divides_everywhere = [True] * len(constraints)
        seen = False
        for idx in self._unfiltered_chunks():
            seen = seen or len(idx) > 0
            columns = {p.name: value_arrays[j][idx[:, j]] for j, p in enumerate(self.parameters)}
            values = {**(context or {}), **columns}
            for i, constraint in enumerate(constraints):
                result, failed = constraint.evaluate_parts(values)
                failed = np.broadcast_to(np.asarray(failed, dtype=bool), (len(idx),))
                valid = np.broadcast_to(np.asarray(result, dtype=bool), (len(idx),)) & ~failed
                holds_somewhere[i] = holds_somewhere[i] or bool(valid.any())
                divides_everywhere[i] = divides_everywhere[i] and bool(failed.all())
        if not seen:
            return []
        return [(c.text, divides_everywhere[i]) for i, c in enumerate(constraints) if not holds_somewhere[i]]

    def _unfiltered_chunks(self) -> Iterator[np.ndarray]:
        """The configs before constraints, as matrices of value indices: the cartesian product in
        chunks of _CHUNK, or the allow-list's configs that the parameters' values still hold."""
        if self.allowed_keys is not None:
            rows = self._allowed_rows()
            if len(rows):
                yield rows
            return
        sizes = [len(p.values) for p in self.parameters]
        total = self.cartesian_size
        for start in range(0, total, _CHUNK):
            flat = np.arange(start, min(total, start + _CHUNK), dtype=np.int64)
            yield np.stack(np.unravel_index(flat, sizes), axis=1).astype(np.int32)

    def _allowed_rows(self) -> np.ndarray:
        assert self.allowed_keys is not None
        lookup = [{str(v): i for i, v in enumerate(p.values)} for p in self.parameters]
        rows = []
        for key in self.allowed_keys:
            parts = key.split(",")
            if len(parts) != len(lookup):
                continue
            try:
                rows.append([table[text] for table, text in zip(lookup, parts, strict=True)])
            except KeyError:
                continue  # a value outside a restricted parameter list
        return np.array(sorted(rows), dtype=np.int32) if rows else np.zeros((0, len(lookup)), dtype=np.int32)

    def _mask(self, idx: np.ndarray, value_arrays: list[np.ndarray], context: dict[str, Any]) -> np.ndarray:
        mask = np.ones(len(idx), dtype=bool)
        if not self.parsed_constraints:
            return mask
        columns = {p.name: value_arrays[j][idx[:, j]] for j, p in enumerate(self.parameters)}
        values = {**context, **columns}
        for constraint in self.parsed_constraints:
            result = constraint.evaluate(values)
            mask &= np.broadcast_to(np.asarray(result, dtype=bool), mask.shape)
        return mask

    def valid_configs(self, context: Mapping[str, Any] | None = None) -> list[Config]:
        return [self.config_at(row) for row in self.valid_indices(context)]


def _plain(value: Any) -> Value:
    """numpy scalars → Python scalars (JSON and SQL reject numpy types)."""
    if isinstance(value, np.generic):
        return value.item()
    return value


def _same_value(given: Value, values: Sequence[Value]) -> Value | None:
    """The value of ``values`` that ``given`` names, or None. Equality alone is too loose: ``True ==
    1`` and ``16.0 == 16``, and a config holding 16.0 has another key than the space's 16, so such a
    restriction left no config ("empty search space"). An integer still names an equal float."""
    for value in values:
        if value == given and isinstance(given, bool) == isinstance(value, bool):
            if isinstance(given, float) and not isinstance(value, float):
                continue
            return value
    return None
