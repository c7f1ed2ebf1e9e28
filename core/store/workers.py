"""GPU worker registry: registration, heartbeats stamped by the database clock, liveness, presence.

Presence: each worker process holds a session-level advisory lock, keyed by its name, on a database
connection of its own for as long as it lives (worker/presence.py). The operating system closes that
connection the moment the process dies, kill -9 included, and PostgreSQL drops the lock with it, so
housekeeping sees a dead worker at its next tick (lock gone, see :func:`absent_workers`) instead of
after a lease. A worker that is alive but stuck (SIGSTOP) keeps its
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
    memory_bytes: int | None = None  # the GPU's total memory, where the backend knows it


def model_memory_bytes(session: Session, gpu_model: str) -> int | None:
    """The least total GPU memory any worker of ``gpu_model`` ever registered with (a trial may land
    on any of them), or None when none reported one."""
    return session.execute(
        select(func.min(GpuWorker.memory_bytes)).where(GpuWorker.gpu_model == gpu_model)
    ).scalar_one_or_none()


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


def stopped_within(session: Session, seconds: float) -> bool:
    """Was a worker stopped, or found gone (:func:`absent_workers`), in the last ``seconds``?"""
    found = session.execute(
        select(GpuWorker.name).where(GpuWorker.stopped_at > func.now() - timedelta(seconds=seconds)).limit(1)
    ).first()
    return found is not None


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


# Presence locks: one bigint advisory key per worker name, the server's own 64-bit hash of it, so the
# worker that takes the lock and the housekeeping that looks for it agree, and two names share a key
# with a chance of about n**2 / 2**65 (the earlier 31-bit hash made that likely at a few thousand
# workers, and a collision hides a dead worker behind a live one's lock). The seed keeps the keys apart
# from other applications' bigint locks on the same database.
PRESENCE_LOCK_SEED = 0x6B66  # "kf"
# How many heartbeat periods a worker whose lock predates the server's epoch must be silent, counted
# from the epoch or its last heartbeat, before housekeeping judges it gone (see absent_workers). A live
# worker retries a failed beat at once, then every quarter period (worker/presence.py: RETRY_FRACTION),
# so it holds its lock again at the latest at its first beat after the server's return: within a
# period, which leaves it a period of margin for a loaded machine. It was 3 periods while a failed
# beat waited a whole period for the next: the lock again within 2 periods, the same margin.
SILENCE_HEARTBEATS = 2
_PRESENCE_KEY = "hashtextextended({name}, {seed})"
# The form a worker of the previous version holds (two int4 keys: this class, a 31-bit hash): such a
# worker is still recognised as present while a farm is upgraded one process at a time.
_LEGACY_LOCK_CLASS = 0x6B66


def _key(name: str) -> str:
    return _PRESENCE_KEY.format(name=name, seed=PRESENCE_LOCK_SEED)


def mark_epoch(session: Session) -> bool:
    """Write this server's presence epoch if it is missing; True when it was (the server reinitialised
    since it was last written: see :func:`absent_workers`)."""
    written = session.execute(
        text("INSERT INTO presence_epoch (id) VALUES (1) ON CONFLICT (id) DO NOTHING RETURNING id")
    ).first()
    return written is not None


def take_presence(session: Session, name: str) -> bool:
    """Take worker ``name``'s presence lock on ``session``'s connection (which must stay open for the
    process's lifetime) and stamp ``presence_since`` through that same connection, so a stamp never
    outlives the lock it stands for (a PostgreSQL restart drops both: see :func:`absent_workers`).
    The server's epoch is written first if missing, so the stamp comes after it.

    Returns:
        False when another live session holds the lock: a second process under the same name.
    """
    mark_epoch(session)
    taken = session.execute(text(f"SELECT pg_try_advisory_lock({_key(':name')})"), {"name": name}).scalar_one()
    if taken:
        session.execute(
            update(GpuWorker)
            .where(GpuWorker.name == name)
            .values(presence_since=func.clock_timestamp(), stopped_at=None)  # after the epoch's now()
        )
    return bool(taken)


def absent_workers(session: Session, silent_seconds: float) -> list[str]:
    """Workers whose process is gone: it took its presence lock, has not said it stopped, and no
    session holds its lock any more. Marked stopped here (its next heartbeat, if it is somehow alive,
    undoes that and takes the lock again).

    A missing lock proves the process dead at once when the lock was taken after the server last
    (re)initialised. Reinitialising drops every lock while the workers live on: a restart
    (``pg_postmaster_start_time()``), crash recovery after one backend died (which keeps that start
    time) and a failover to a standby (which brings an older one). The last two empty the unlogged
    ``presence_epoch`` table, which is written again (here or by the next lock taken) after them: its
    row's time, or the restart's if later, is the epoch. Any role that owns the schema reads it; the
    start times of the server's auxiliary processes, which crash recovery resets too, are hidden from a
    role without ``pg_read_all_stats``. A worker whose lock predates the epoch and has not taken it
    again is judged as before: gone once silent for ``silent_seconds`` (a few heartbeat periods) since
    its last heartbeat or the epoch, whichever is later; a live one heartbeats and takes its lock again
    within a beat of the server's return. While the epoch is missing nothing is judged.
    """
    if mark_epoch(session):
        return []  # the server reinitialised at an unknown moment before now: judge nobody this time
    names = list(
        session.execute(
            text(
                "WITH epoch AS (SELECT greatest(pg_postmaster_start_time(), started_at) AS at "
                "               FROM presence_epoch WHERE id = 1) "
                "SELECT w.name FROM gpu_workers w, epoch e "
                "WHERE w.presence_since IS NOT NULL AND w.stopped_at IS NULL "
                "AND (w.presence_since > e.at "
                "     OR greatest(w.last_heartbeat, e.at) < now() - make_interval(secs => :silent)) "
                "AND NOT EXISTS (SELECT 1 FROM pg_locks l WHERE l.locktype = 'advisory' AND l.granted "
                "AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database()) "
                f"AND ((l.objsubid = 1 AND l.classid = CAST(({_key('w.name')} >> 32) & 4294967295 AS oid) "
                f"      AND l.objid = CAST({_key('w.name')} & 4294967295 AS oid)) "
                "  OR (l.objsubid = 2 AND l.classid = CAST(:legacy AS oid) "
                "      AND l.objid = CAST(hashtext(w.name) & 2147483647 AS oid)))) "
                "FOR UPDATE OF w SKIP LOCKED"
            ),
            {"legacy": _LEGACY_LOCK_CLASS, "silent": float(silent_seconds)},
        ).scalars()
    )
    if names:
        session.execute(update(GpuWorker).where(GpuWorker.name.in_(names)).values(stopped_at=func.now()))
    return names
