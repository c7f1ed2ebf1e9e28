"""Celery side of a GPU worker: one process per GPU, solo pool, queue gpu.<model-slug>.

Start with ``kernelfarm worker``: it derives the queue from the device's real name, then execs a
Celery worker with ``--pool solo``. Tasks then run in this one process, one at a time, so the
backend built here (compile pool, measuring child, standby profiler) lives across tasks and a
profile batch never overlaps a timed measurement. The solo pool ignores Celery's time limits; the
runner enforces them (worker/time_limits.py).

This process never creates a CUDA context. The cuda backend measures in a spawned measuring child
(the only process that measures) and profiles in separate ncu processes (the standby one holds an idle
context while it waits for a batch); the device's
identity comes from NVML. A kernel that faults or hangs costs that child, not this process, and
the child and the compile pool start from a clean interpreter (spawned, never forked from a
process holding a context).
"""

from __future__ import annotations

import logging
import socket
import threading
import uuid
from typing import Any

from celery.signals import worker_init, worker_ready, worker_shutdown

from kernelfarm.core.advance_requests import request_advance
from kernelfarm.core.capabilities import capability_queues
from kernelfarm.core.celery_app import EVALUATE_TASK, PROFILE_TASK, make_celery
from kernelfarm.core.db import session_scope
from kernelfarm.core.gpu import queue_for
from kernelfarm.core.printable import quoted
from kernelfarm.core.settings import get_settings
from kernelfarm.core.standby import wait_at_gate
from kernelfarm.core.store import workers as worker_store
from kernelfarm.kernels.registry import all_kernels
from kernelfarm.worker import runner
from kernelfarm.worker.backend_factory import make_backend
from kernelfarm.worker.backends.base import Backend
from kernelfarm.worker.capabilities import worker_capabilities
from kernelfarm.worker.db_retry import with_db_retry
from kernelfarm.worker.presence import Presence
from kernelfarm.worker.profiling import profile_trials

logger = logging.getLogger(__name__)
settings = get_settings()
app = make_celery(settings)


# Backends a spare builds before its gate: they hold no device and start no process of their own. A
# GPU backend starts its compile pool as it is built (cores - 1 processes): a spare builds it once promoted.
BUILT_BY_A_SPARE = ("replay", "fake")


class _WorkerState:
    backend: Backend | None = None
    name: str = f"worker@{socket.gethostname()}"
    gpu_uuid: str | None = None
    serves: runner.Serves | None = None  # set at registration: what this worker may measure
    presence: Presence | None = None
    heartbeat: threading.Thread | None = None
    stop = threading.Event()


def _backend() -> Backend:
    if _WorkerState.backend is None:
        _WorkerState.backend = make_backend(settings)
    return _WorkerState.backend


@worker_init.connect
def _prepare(**_: Any) -> None:
    """Before Celery connects to the broker: build the backend and load the kernel catalogue (~0.25 s
    with its validation), so no job's first trial pays for them. A warm spare (core/standby.py)
    then waits here for its supervisor, before it consumes a message, registers or touches its device."""
    if settings.worker_backend in BUILT_BY_A_SPARE:
        _backend()
    try:
        all_kernels()
    except Exception:
        logger.warning("loading the kernel catalogue failed; the first trial will pay for it", exc_info=True)
    wait_at_gate(settings)
    _backend()


@worker_ready.connect
def _register(sender: Any = None, **_: Any) -> None:
    backend = _backend()
    # Before registering: until then no job counts on this worker, so its start-up is not paid by
    # the first trial of one. After the spare's gate: a GPU backend's warm-up takes a device context.
    try:
        backend.warm_up()
    except Exception:
        logger.warning("backend warm-up failed; the first trial will pay for it", exc_info=True)
    identity = backend.identity()
    capabilities = worker_capabilities(settings)
    # The queues of trials that need what this worker has (a plugin, the uploaded-Python opt-in):
    # only workers that have it consume them (core/capabilities.py).
    if hasattr(sender, "add_task_queue"):
        for extra in capability_queues(queue_for(identity.gpu_model), capabilities):
            sender.add_task_queue(extra)
    _WorkerState.name = getattr(sender, "hostname", _WorkerState.name)
    _WorkerState.gpu_uuid = identity.gpu_uuid
    _WorkerState.serves = runner.Serves(identity.gpu_model, tuple(capabilities))
    with session_scope() as session:
        worker_store.register_worker(
            session,
            worker_store.WorkerIdentity(
                name=_WorkerState.name,
                hostname=socket.gethostname(),
                backend=backend.name,
                gpu_model=identity.gpu_model,
                gpu_name=identity.gpu_name,
                queue=queue_for(identity.gpu_model),
                gpu_uuid=identity.gpu_uuid,
                compute_capability=identity.compute_capability,
                driver_version=identity.driver_version,
                cuda_version=identity.cuda_version,
                capabilities=tuple(capabilities),
                memory_bytes=identity.memory_bytes,
            ),
        )
    # Before the first task: from now on, housekeeping frees this worker's trials a few heartbeats
    # after its death (core/store/workers.py), not a lease later.
    _WorkerState.presence = Presence(settings, _WorkerState.name)
    try:
        _WorkerState.presence.start()
    except Exception:
        logger.warning("could not take the presence lock yet; the heartbeat loop retries", exc_info=True)
    _WorkerState.heartbeat = threading.Thread(target=_heartbeat_loop, name="worker-heartbeat", daemon=True)
    _WorkerState.heartbeat.start()
    logger.info("worker %s registered for %s (%s backend)", _WorkerState.name, identity.gpu_model, backend.name)


def _heartbeat_loop() -> None:
    presence = _WorkerState.presence
    assert presence is not None
    presence.run(_WorkerState.stop, settings.heartbeat_seconds)


@worker_shutdown.connect
def _unregister(**_: Any) -> None:
    _WorkerState.stop.set()
    if _WorkerState.presence is not None:
        # The stop mark goes through the presence, after any beat in progress and before the lock
        # is let go: a beat cannot clear it, and a stopped worker is not judged absent.
        _WorkerState.presence.stop()
    else:
        try:
            with session_scope() as session:
                worker_store.stop_worker(session, _WorkerState.name)
        except Exception:
            logger.warning("could not mark worker stopped", exc_info=True)
    if _WorkerState.heartbeat is not None:
        _WorkerState.heartbeat.join(timeout=5)  # its beats write nothing any more
    if _WorkerState.backend is not None:
        _WorkerState.backend.close()


def _request_next_step(job_id: uuid.UUID) -> None:
    request_advance(app, str(job_id))  # coalesced: one pending step per job (core/advance_requests.py)


# The largest id a BIGINT column holds: the trials' ids are one.
MAX_ID = 2**63 - 1


def _an_id(value: Any) -> bool:
    return type(value) is int and 0 < value <= MAX_ID  # not a bool, a float, or a digit string


def _arguments(args: tuple[Any, ...], kwargs: dict[str, Any], names: tuple[str, ...]) -> list[Any] | str:
    """The task's arguments in order, or why the message does not carry exactly ``names``."""
    unexpected = sorted(set(kwargs) - set(names[len(args) :]))
    if len(args) > len(names):
        return f"takes {len(names)} argument(s) ({', '.join(names)}), got {len(args)}"
    if unexpected:
        return f"unexpected or repeated argument(s) {', '.join(map(quoted, unexpected))}"
    absent = [name for name in names[len(args) :] if name not in kwargs]
    if absent:
        return f"missing argument(s) {', '.join(absent)}"
    return [*args, *(kwargs[name] for name in names[len(args) :])]


def _refused(task: str, reason: str) -> None:
    """A message this worker will not run: one line saying why (no traceback), and the message is
    acknowledged, so it is neither retried nor in the way of the next one."""
    logger.warning("refused a %s message: %s", task, reason)


def evaluate_argument(args: tuple[Any, ...], kwargs: dict[str, Any]) -> int | str:
    """The trial id an evaluate message carries, or why it carries none (core/dead_deliveries.py
    reads the same shape: ``[trial_id]``)."""
    values = _arguments(args, kwargs, ("trial_id",))
    if isinstance(values, str):
        return values
    if not _an_id(values[0]):
        return f"trial_id must be a positive integer, got {quoted(values[0])}"
    return int(values[0])


def profile_arguments(args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[uuid.UUID, list[int]] | str:
    """The (job id, trial ids) a profile message carries, or why it does not."""
    values = _arguments(args, kwargs, ("job_id", "trial_ids"))
    if isinstance(values, str):
        return values
    job_id, trial_ids = values
    try:
        parsed = uuid.UUID(job_id) if isinstance(job_id, str) else None
    except ValueError:
        parsed = None
    if parsed is None:
        return f"job_id must be a job's UUID, got {quoted(job_id)}"
    if not isinstance(trial_ids, list) or not all(map(_an_id, trial_ids)):
        return f"trial_ids must be a list of positive integers, got {quoted(trial_ids)}"
    return parsed, list(trial_ids)


@app.task(name=EVALUATE_TASK, acks_late=True, reject_on_worker_lost=True)
def evaluate(*args: Any, **kwargs: Any) -> str:
    """Measure trial ``trial_id`` (the message's one argument). A malformed message is refused with
    the reason; so is a trial this worker must not measure (runner.Serves), which stays queued."""
    trial_id = evaluate_argument(args, kwargs)
    if isinstance(trial_id, str):
        _refused(EVALUATE_TASK, trial_id)
        return "refused"
    if _WorkerState.presence is not None:
        _WorkerState.presence.claiming()
    outcome = runner.evaluate(
        trial_id,
        _backend(),
        _WorkerState.name,
        _WorkerState.gpu_uuid,
        settings.heartbeat_seconds,
        _request_next_step,
        # The solo pool ignores Celery's own time limits; the runner enforces the same values.
        soft_time_limit=settings.trial_soft_time_limit,
        hard_time_limit=settings.trial_hard_time_limit,
        compile_ahead=settings.compile_ahead,
        measure_batch=settings.measure_batch,
        serves=_WorkerState.serves,
    )
    return outcome.status


@app.task(name=PROFILE_TASK, acks_late=True, reject_on_worker_lost=True)
def profile(*args: Any, **kwargs: Any) -> int:
    """A batch of Nsight Compute profiles (``job_id``, ``trial_ids``), between measurements on this
    GPU. A malformed message, one for no job, or for a job this worker must not measure, is refused
    with the reason."""
    parsed = profile_arguments(args, kwargs)
    if isinstance(parsed, str):
        _refused(PROFILE_TASK, parsed)
        return 0
    job_id, trial_ids = parsed
    serves = _WorkerState.serves
    reason = with_db_retry(f"job of profile batch {job_id}", lambda: runner.job_refusal(job_id, serves))
    if reason is not None:
        _refused(PROFILE_TASK, reason)
        return 0
    recorded = profile_trials(job_id, trial_ids, _backend(), _WorkerState.name)
    _request_next_step(job_id)  # the job may be waiting only for these to complete
    return recorded
