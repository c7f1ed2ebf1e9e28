"""The coordinator: a stateless step (history → optimizer → ask → dispatch) run as Celery tasks."""
