"""GPU workers: Celery tasks (thin), the trial runner, and measurement backends (cuda, replay)."""
