"""One error hierarchy for the whole farm; api/errors.py maps it to HTTP in one place."""

from __future__ import annotations


class KernelfarmError(Exception):
    """Base class: a problem the caller can understand and act on."""


class InvalidInput(KernelfarmError):
    """The request is well-formed but asks for something impossible (HTTP 422)."""


class NotFound(KernelfarmError):
    """The named object does not exist (HTTP 404)."""


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
