#!/usr/bin/env python3
"""Container health checks for kernelfarm (installed in the images as ``kernelfarm-healthcheck``).

Docker HEALTHCHECK, compose ``healthcheck`` and Kubernetes exec probes run it; it exits 0 when
healthy and 1 otherwise, with one line saying why. Each component needs a different signal:

``http URL``
    The API: GET /health (liveness) or /ready (database and broker). Standard library only, so
    the slim image needs no curl.
``celery [--node NAME]``
    The coordinator: a broadcast ping answered by its Celery node (default ``tuner@<hostname>``).
    Its prefork parent answers even while every child is stepping a job.
``worker [--name NAME]``
    A GPU worker: its heartbeat row in Postgres is fresh. A solo-pool worker cannot answer a Celery
    ping while it measures (trials run for minutes), but its heartbeat thread keeps writing, so the
    database is the honest signal. Default: any worker registered from this host name.
``schema [--wait SECONDS]``
    The database is at the newest Alembic revision this image ships. Used as an init container so
    a new API/coordinator/worker version never starts against a schema it does not know; the
    migration itself runs once, as its own deploy step (``kernelfarm db upgrade``).
"""

from __future__ import annotations

import argparse
import socket
import sys
import time
import urllib.error
import urllib.request


class Unhealthy(Exception):
    """The checked component is up but not healthy; the message says why."""


def check_http(url: str, timeout: float) -> str:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:
            return f"{url}: HTTP {response.status}"
    except urllib.error.HTTPError as error:  # 4xx/5xx, e.g. /ready's 503 with the failing check
        body = error.read(300).decode("utf-8", "replace")
        raise Unhealthy(f"{url}: HTTP {error.code} {body}") from None
    except (urllib.error.URLError, OSError) as error:
        raise Unhealthy(f"{url}: {error}") from None


def check_celery(node: str | None, timeout: float) -> str:
    from kernelfarm.core.celery_app import make_celery

    name = node or f"tuner@{socket.gethostname()}"
    replies = make_celery().control.ping(destination=[name], timeout=timeout)
    if not any(name in reply for reply in replies):
        raise Unhealthy(f"no ping reply from Celery node {name} within {timeout:g}s")
    return f"{name}: pong"


def check_worker(name: str | None) -> str:
    from kernelfarm.core.db import session_scope
    from kernelfarm.core.settings import get_settings
    from kernelfarm.core.store import workers

    settings = get_settings()
    hostname = socket.gethostname()
    with session_scope() as session:
        live = workers.live_workers(session, settings.worker_ttl_seconds)
        mine = [w.name for w in live if (w.name == name if name else w.hostname == hostname)]
    if not mine:
        who = name or f"any worker on host {hostname}"
        raise Unhealthy(f"no fresh heartbeat from {who} in the last {settings.worker_ttl_seconds:g}s")
    return f"live: {', '.join(mine)}"


def check_schema(wait: float) -> str:
    from alembic.runtime.migration import MigrationContext
    from alembic.script import ScriptDirectory

    from kernelfarm.core.db import get_engine
    from kernelfarm.core.migrate import alembic_config
    from kernelfarm.core.settings import get_settings

    url = get_settings().require_database_url()
    heads = set(ScriptDirectory.from_config(alembic_config(url)).get_heads())
    deadline = time.monotonic() + wait
    while True:
        try:
            with get_engine(url).connect() as connection:
                current = set(MigrationContext.configure(connection).get_current_heads())
            if current == heads:
                return f"schema at {', '.join(sorted(heads))}"
            problem = (
                f"schema at {sorted(current) or 'nothing'}, this version needs {sorted(heads)}"
                " (run `kernelfarm db upgrade` first)"
            )
        except Exception as error:  # the database may still be starting: keep waiting
            first_line = (str(error).strip().splitlines() or [""])[0]
            problem = f"database unavailable: {type(error).__name__}: {first_line}"
        if time.monotonic() >= deadline:
            raise Unhealthy(problem)
        time.sleep(2)


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="kernelfarm-healthcheck", description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="check", required=True)
    http = sub.add_parser("http", help="GET a URL; healthy on 2xx")
    http.add_argument("url")
    http.add_argument("--timeout", type=float, default=5.0)
    celery = sub.add_parser("celery", help="ping a Celery node (the coordinator)")
    celery.add_argument("--node", help="Celery node name (default: tuner@<hostname>)")
    celery.add_argument("--timeout", type=float, default=5.0)
    worker = sub.add_parser("worker", help="a GPU worker's heartbeat in the database is fresh")
    worker.add_argument("--name", help="worker (Celery node) name (default: any on this host)")
    schema = sub.add_parser("schema", help="the database schema is at this version's Alembic head")
    schema.add_argument("--wait", type=float, default=0.0, help="keep retrying for this many seconds")
    return p


def run(args: argparse.Namespace) -> str:
    if args.check == "http":
        return check_http(args.url, args.timeout)
    if args.check == "celery":
        return check_celery(args.node, args.timeout)
    if args.check == "worker":
        return check_worker(args.name)
    return check_schema(args.wait)


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        print(f"healthy: {run(args)}")
    except Unhealthy as problem:
        print(f"unhealthy: {problem}", file=sys.stderr)
        return 1
    except Exception as error:  # a health check must answer, never crash with a traceback
        first_line = (str(error).strip().splitlines() or [""])[0]
        print(f"unhealthy: {type(error).__name__}: {first_line}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
