"""The store: the only code that writes jobs, trials, workers and tokens.

Functions take an open :class:`sqlalchemy.orm.Session` (from ``core.db.session_scope``) so the
caller decides the transaction boundary; they never commit themselves.
"""
