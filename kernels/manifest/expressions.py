"""Arithmetic in manifests (shapes, grid, defines, FLOPs): the farm's safe expression language.

The same parser as constraints (:mod:`kernelfarm.core.constraints`): no ``eval``, a whitelist of
nodes, names checked at parse time. Here an expression yields a number rather than a truth value.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from kernelfarm.core.constraints import Constraint, parse_constraint
from kernelfarm.core.errors import ConstraintError


@dataclass(frozen=True)
class Expr:
    """A parsed arithmetic expression; ``where`` names the manifest field, for error messages."""

    where: str
    parsed: Constraint

    @classmethod
    def parse(cls, where: str, text: str, names: frozenset[str]) -> Expr:
        """Raises:
        ConstraintError: the text does not parse, or names something that is not defined here.
        """
        try:
            return cls(where, parse_constraint(text, names))
        except ConstraintError as exc:
            raise ConstraintError(f"{where}: {exc}") from None

    @property
    def names(self) -> frozenset[str]:
        return self.parsed.names

    def value(self, values: Mapping[str, Any]) -> float | int:
        """The expression's number (an int when it is integral, as grid sizes and shapes must be)."""
        result = self.parsed.evaluate(values)
        if isinstance(result, np.ndarray | np.generic):
            result = result.item()
        if isinstance(result, bool):
            return int(result)
        if not isinstance(result, int | float):
            raise ConstraintError(f"{self.where}: {self.parsed.text!r} is not a number")
        return int(result) if float(result).is_integer() else float(result)

    def integer(self, values: Mapping[str, Any]) -> int:
        result = self.value(values)
        if not isinstance(result, int):
            raise ConstraintError(f"{self.where}: {self.parsed.text!r} = {result} is not an integer")
        return result
