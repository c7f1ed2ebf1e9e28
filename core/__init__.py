"""Shared pieces of kernelfarm: settings, database, models, the store, search spaces, Celery app."""
