"""One error hierarchy for the whole farm; api/errors.py maps it to HTTP in one place."""

from __future__ import annotations

from collections.abc import Sequence


class KernelfarmError(Exception):
    """Base class: a problem the caller can understand and act on."""


class InvalidInput(KernelfarmError):
    """The request is well-formed but asks for something impossible (HTTP 422)."""


class NotFound(KernelfarmError):
    """The named object does not exist (HTTP 404)."""


class NoSuchVersion(NotFound):
    """The kernel exists, but not at the version asked for (HTTP 404, as NotFound): said apart from an
    unknown kernel, with the versions there are."""

    def __init__(self, name: str, version: int, versions: Sequence[int]) -> None:
        super().__init__(f"kernel {name!r} has no version {version} (its versions: {_listed(versions)})")
        self.name = name
        self.version = version
        self.versions = tuple(versions)


def _listed(numbers: Sequence[int], most: int = 10) -> str:
    """``1, 2, 3``; a long list keeps its ends: ``1, 2, 3, ..., 38, 39, 40``."""
    shown = [str(n) for n in numbers]
    if len(shown) > most:
        shown = [*shown[:3], "...", *shown[-3:]]
    return ", ".join(shown)


class Conflict(KernelfarmError):
    """The object is in a state that forbids the operation (HTTP 409)."""


class Unauthorized(KernelfarmError):
    """No valid credentials (HTTP 401)."""


class Forbidden(KernelfarmError):
    """Valid credentials without the needed scope (HTTP 403)."""


class Unavailable(KernelfarmError):
    """A service the farm needs (PostgreSQL) cannot answer now; retry later (HTTP 503)."""


class ConstraintError(InvalidInput):
    """A constraint expression could not be parsed or uses something not allowed."""
