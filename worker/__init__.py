"""GPU workers: Celery tasks (thin), the trial runner, the backends (cuda, replay, fake) and the measuring
child they share."""
