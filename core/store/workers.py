"""GPU worker registry: registration, heartbeats stamped by the database clock, liveness, presence.

Presence: each worker process holds a session-level advisory lock, keyed by its name, on a database
connection of its own for as long as it lives (worker/presence.py). The operating system closes that
connection the moment the process dies, kill -9 included, and PostgreSQL drops the lock with it, so
housekeeping sees a dead worker a few heartbeats after its death (lock gone and silent, see
:func:`absent_workers`) instead of after a lease. A worker that is alive but stuck (SIGSTOP) keeps its
connection and its lock: its trials wait for the lease, as before.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta

from sqlalchemy import func, select, text, update
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.orm import Session

from kernelfarm.core.models import GpuWorker
from kernelfarm.core.store.text import storable


@dataclass(frozen=True)
class WorkerIdentity:
    name: str
    hostname: str
    backend: str
    gpu_model: str
    gpu_name: str
    queue: str
    gpu_uuid: str | None = None
    compute_capability: str | None = None
    driver_version: str | None = None
    cuda_version: str | None = None
    # kernel plugins and opt-ins the worker has (core/capabilities.py)
    capabilities: tuple[str, ...] = ()


def register_worker(session: Session, identity: WorkerIdentity) -> None:
    values = storable(identity.__dict__) | {
        "last_heartbeat": func.now(), "stopped_at": None, "capabilities": sorted(identity.capabilities),
        "presence_since": None,  # this process has not taken its presence lock yet (take_presence)
    }  # fmt: skip
    statement = insert(GpuWorker).values(**values, started_at=func.now())
    session.execute(statement.on_conflict_do_update(index_elements=["name"], set_=values))


def heartbeat_worker(session: Session, name: str) -> None:
    session.execute(update(GpuWorker).where(GpuWorker.name == name).values(last_heartbeat=func.now(), stopped_at=None))


def stop_worker(session: Session, name: str) -> None:
    session.execute(update(GpuWorker).where(GpuWorker.name == name).values(stopped_at=func.now()))


def live_clause(ttl_seconds: float):
    return (GpuWorker.stopped_at.is_(None)) & (GpuWorker.last_heartbeat > func.now() - timedelta(seconds=ttl_seconds))


def live_workers(session: Session, ttl_seconds: float, gpu_model: str | None = None) -> Sequence[GpuWorker]:
    query = select(GpuWorker).where(live_clause(ttl_seconds)).order_by(GpuWorker.gpu_model, GpuWorker.name)
    if gpu_model is not None:
        query = query.where(GpuWorker.gpu_model == gpu_model)
    return session.execute(query).scalars().all()


def all_workers(session: Session) -> Sequence[GpuWorker]:
    return session.execute(select(GpuWorker).order_by(GpuWorker.gpu_model, GpuWorker.name)).scalars().all()


def known_architectures(session: Session) -> dict[str, str | None]:
    """GPU model → compute capability, from every worker ever seen (for the lookup fallback)."""
    rows = session.execute(select(GpuWorker.gpu_model, GpuWorker.compute_capability)).all()
    out: dict[str, str | None] = {}
    for model, capability in rows:
        out[model] = out.get(model) or capability
    return out


# Advisory locks of two int4 keys: (PRESENCE_LOCK_CLASS, a hash of the worker's name). The hash is the
# server's own, so the worker that takes the lock and the housekeeping that looks for it agree.
PRESENCE_LOCK_CLASS = 0x6B66  # "kf"
_PRESENCE_KEY = "hashtext({name}) & 2147483647"


def take_presence(session: Session, name: str) -> bool:
    """Take worker ``name``'s presence lock on ``session``'s connection (which must stay open for the
    process's lifetime) and stamp ``presence_since`` through that same connection, so a stamp never
    outlives the lock it stands for (a PostgreSQL restart drops both: see :func:`absent_workers`).

    Returns:
        False when another live session holds the lock: a second process under the same name.
    """
    taken = session.execute(
        text(f"SELECT pg_try_advisory_lock(:cls, {_PRESENCE_KEY.format(name=':name')})"),
        {"cls": PRESENCE_LOCK_CLASS, "name": name},
    ).scalar_one()
    if taken:
        session.execute(
            update(GpuWorker).where(GpuWorker.name == name).values(presence_since=func.now(), stopped_at=None)
        )
    return bool(taken)


def absent_workers(session: Session, silent_seconds: float) -> list[str]:
    """Workers whose process is gone: it took its presence lock while this database server has been
    up, has not said it stopped, no session holds its lock any more, and it has not heartbeaten for
    ``silent_seconds``. Marked stopped here (its next heartbeat, if it is somehow alive, undoes that
    and takes the lock again).

    The server can drop every lock without a restart (crash recovery after one backend died ends all
    sessions but keeps ``pg_postmaster_start_time()``; a failover to a standby brings an older start
    time), so a missing lock alone does not prove a process dead: a live worker takes its lock again
    and heartbeats through the same connection on its next beat, hence the silence as well
    (``silent_seconds``: a few heartbeat periods, far below the lease). A full restart is covered by
    both rules: a lock dating from before it is not judged until it is taken again.
    """
    names = list(
        session.execute(
            text(
                "SELECT w.name FROM gpu_workers w "
                "WHERE w.presence_since IS NOT NULL AND w.stopped_at IS NULL "
                "AND w.presence_since > pg_postmaster_start_time() "
                "AND w.last_heartbeat < now() - make_interval(secs => :silent) "
                "AND NOT EXISTS (SELECT 1 FROM pg_locks l WHERE l.locktype = 'advisory' AND l.granted "
                "AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database()) "
                f"AND l.classid = CAST(:cls AS oid) AND l.objsubid = 2 "
                f"AND l.objid = CAST({_PRESENCE_KEY.format(name='w.name')} AS oid)) "
                "FOR UPDATE OF w SKIP LOCKED"
            ),
            {"cls": PRESENCE_LOCK_CLASS, "silent": float(silent_seconds)},
        ).scalars()
    )
    if names:
        session.execute(update(GpuWorker).where(GpuWorker.name.in_(names)).values(stopped_at=func.now()))
    return names
