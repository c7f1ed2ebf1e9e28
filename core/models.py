"""SQLAlchemy 2 models. The schema itself is made only by Alembic (migrations/)."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any, ClassVar

from sqlalchemy import (
    BigInteger,
    DateTime,
    Float,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    String,
    Text,
    UniqueConstraint,
    func,
)
from sqlalchemy.dialects.postgresql import JSONB, UUID
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column, relationship

from kernelfarm.core.key_lengths import CONFIG_KEY_LENGTH, PROBLEM_KEY_LENGTH


class Base(DeclarativeBase):
    type_annotation_map: ClassVar[dict[Any, Any]] = {dict[str, Any]: JSONB, list[Any]: JSONB}


class Kernel(Base):
    """A kernel as the farm saw it: name, version, source hash and its search space."""

    __tablename__ = "kernels"
    __table_args__ = (UniqueConstraint("name", "version", "source_hash"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(128), index=True)
    version: Mapped[int] = mapped_column(Integer)
    source_hash: Mapped[str] = mapped_column(String(64))
    space: Mapped[dict[str, Any]] = mapped_column(JSONB)
    description: Mapped[str] = mapped_column(Text, default="")
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())


class GpuWorker(Base):
    __tablename__ = "gpu_workers"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(255), unique=True)  # Celery hostname, e.g. gpu0@host
    hostname: Mapped[str] = mapped_column(String(255))
    backend: Mapped[str] = mapped_column(String(32))  # "cuda" or "replay"
    gpu_model: Mapped[str] = mapped_column(String(128), index=True)
    gpu_name: Mapped[str] = mapped_column(String(255))
    gpu_uuid: Mapped[str | None] = mapped_column(String(128))
    compute_capability: Mapped[str | None] = mapped_column(String(16))
    driver_version: Mapped[str | None] = mapped_column(String(64))
    cuda_version: Mapped[str | None] = mapped_column(String(64))
    queue: Mapped[str] = mapped_column(String(160))
    started_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())
    last_heartbeat: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())
    stopped_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    # When the worker's process last took its presence lock, by the database clock (core/store/workers.py);
    # NULL while it holds none (starting, or a row written by something that is not a worker process).
    presence_since: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    # What the worker can run beyond the catalogue: "plugin:<dist>==<version>" per kernel plugin it
    # has installed, "uploaded-python" when started with the opt-in (core/capabilities.py).
    capabilities: Mapped[list[Any]] = mapped_column(JSONB, default=list)
    # Total memory of the worker's GPU, as its backend reported it (NVML); NULL where it reported none
    # (replay workers). The API refuses a job whose problem needs more (api/jobs_service.py).
    memory_bytes: Mapped[int | None] = mapped_column(BigInteger)


class KernelVersion(Base):
    """An uploaded kernel: its manifest and files, immutable; ``content_hash`` covers all of them."""

    __tablename__ = "kernel_versions"
    __table_args__ = (UniqueConstraint("name", "version"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(64))
    version: Mapped[int] = mapped_column(Integer)
    content_hash: Mapped[str] = mapped_column(String(64), unique=True)
    manifest: Mapped[str] = mapped_column(Text)  # JSON text: key order matters (tune_params)
    files: Mapped[dict[str, Any]] = mapped_column(JSONB)
    recording: Mapped[bytes | None] = mapped_column(LargeBinary)
    owner: Mapped[str] = mapped_column(String(128))
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())


class Job(Base):
    __tablename__ = "jobs"
    __table_args__ = (Index("ix_jobs_state_created", "state", "created_at"),)

    id: Mapped[uuid.UUID] = mapped_column(UUID(as_uuid=True), primary_key=True, default=uuid.uuid4)
    kernel_id: Mapped[int] = mapped_column(ForeignKey("kernels.id"))
    kernel_name: Mapped[str] = mapped_column(String(128), index=True)
    problem: Mapped[dict[str, Any]] = mapped_column(JSONB)
    problem_key: Mapped[str] = mapped_column(String(PROBLEM_KEY_LENGTH))
    gpu_model: Mapped[str] = mapped_column(String(128), index=True)
    space: Mapped[dict[str, Any]] = mapped_column(JSONB)  # the job's (possibly restricted) space
    objective: Mapped[str] = mapped_column(String(32), default="time")
    strategy: Mapped[str] = mapped_column(String(64))
    strategy_options: Mapped[dict[str, Any]] = mapped_column(JSONB, default=dict)
    seed: Mapped[int] = mapped_column(BigInteger)
    budget_trials: Mapped[int | None] = mapped_column(Integer)
    budget_seconds: Mapped[float | None] = mapped_column(Float)
    parallelism: Mapped[int] = mapped_column(Integer)
    profile: Mapped[str] = mapped_column(String(16), default="all")
    profile_top_k: Mapped[int] = mapped_column(Integer, default=5)
    warm_start: Mapped[bool] = mapped_column(default=True)
    # The prior the job's last asking step used (tuner/history.py prior_use): None before its first
    # such step and for a job submitted with warm_start false.
    warm_start_prior: Mapped[dict[str, Any] | None] = mapped_column(JSONB, nullable=True)
    # Coordinator steps of the job in a row that raised (not counting lost connections): the job fails
    # at settings.max_step_failures (tuner/step_failures.py); a step that succeeds resets it.
    step_failures: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    state: Mapped[str] = mapped_column(String(16), index=True)
    status_message: Mapped[str] = mapped_column(Text, default="")
    owner: Mapped[str] = mapped_column(String(128))
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())
    started_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    finished_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))

    trials: Mapped[list[Trial]] = relationship(back_populates="job", lazy="raise")


class Trial(Base):
    __tablename__ = "trials"
    __table_args__ = (
        UniqueConstraint("job_id", "config_key"),  # a job never evaluates a config twice
        UniqueConstraint("job_id", "seq"),
        Index("ix_trials_job_state", "job_id", "state"),
        Index("ix_trials_lookup", "kernel_name", "gpu_model", "problem_key", "state", "time_ms"),
    )

    id: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    job_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("jobs.id", ondelete="CASCADE"))
    seq: Mapped[int] = mapped_column(Integer)  # order of proposal within the job
    # Denormalized from the job so the best-config lookup is one indexed query.
    kernel_name: Mapped[str] = mapped_column(String(128))
    gpu_model: Mapped[str] = mapped_column(String(128))
    problem_key: Mapped[str] = mapped_column(String(PROBLEM_KEY_LENGTH))
    config: Mapped[dict[str, Any]] = mapped_column(JSONB)
    config_key: Mapped[str] = mapped_column(String(CONFIG_KEY_LENGTH))
    state: Mapped[str] = mapped_column(String(16))
    attempt: Mapped[int] = mapped_column(Integer, default=0)  # claims so far: fences each lease's writes
    # Worker deaths charged to this trial: the times its worker died while measuring it (the
    # worker's oldest claim). Trials claimed behind it go back to the queue uncharged; the retry cap
    # (Settings.max_attempts) applies to this count, not to the attempts.
    losses: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    worker_name: Mapped[str | None] = mapped_column(String(255))
    gpu_uuid: Mapped[str | None] = mapped_column(String(128))
    heartbeat_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    # Set when the attempt's lease was ended early because its worker process is gone (its heartbeat
    # stays the last one it wrote); the reaper then treats the lease as run out. A claim clears it.
    lease_ended_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    dispatched_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    # Timing statistics in milliseconds; every repetition is kept in `times_ms`.
    time_ms: Mapped[float | None] = mapped_column(Float)
    time_p20_ms: Mapped[float | None] = mapped_column(Float)
    time_p80_ms: Mapped[float | None] = mapped_column(Float)
    times_ms: Mapped[list[Any] | None] = mapped_column(JSONB)
    verified: Mapped[bool] = mapped_column(default=False)
    metrics: Mapped[dict[str, Any]] = mapped_column(JSONB, default=dict)
    failure_kind: Mapped[str | None] = mapped_column(String(32))
    failure_message: Mapped[str | None] = mapped_column(Text)
    provenance: Mapped[dict[str, Any]] = mapped_column(JSONB, default=dict)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())
    started_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    finished_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))

    job: Mapped[Job] = relationship(back_populates="trials", lazy="raise")


class TrialProfile(Base):
    """An Nsight Compute profile of a finished trial, taken later and in batches (ncu's start-up
    costs seconds per process). A separate row, so the trial's own measurement never changes."""

    __tablename__ = "trial_profiles"

    trial_id: Mapped[int] = mapped_column(ForeignKey("trials.id", ondelete="CASCADE"), primary_key=True)
    job_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("jobs.id", ondelete="CASCADE"), index=True)
    requested_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())
    profiled_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    # When a worker took the batch (its name in worker_name); None while the request waits in the broker.
    claimed_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    worker_name: Mapped[str | None] = mapped_column(String(255))
    metrics: Mapped[dict[str, Any] | None] = mapped_column(JSONB)
    error: Mapped[str | None] = mapped_column(Text)
    batch_size: Mapped[int | None] = mapped_column(Integer)
    wall_seconds: Mapped[float | None] = mapped_column(Float)  # of the whole batch


class ApiToken(Base):
    __tablename__ = "api_tokens"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(128))
    token_hash: Mapped[str] = mapped_column(String(64), unique=True)  # sha256 hex; the token itself is never stored
    scopes: Mapped[list[Any]] = mapped_column(JSONB)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())
    last_used_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    revoked_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))


class UiSession(Base):
    """A dashboard login (core/store/ui_sessions.py): the browser's cookie holds its secret, whose
    SHA-256 is stored here; it ends at logout, at ``expires_at``, or with its token's revocation."""

    __tablename__ = "ui_sessions"

    id: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    secret_hash: Mapped[str] = mapped_column(String(64), unique=True)
    token_id: Mapped[int] = mapped_column(ForeignKey("api_tokens.id", ondelete="CASCADE"), index=True)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())
    expires_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    ended_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))


class BestVersion(Base):
    """A stamp per kernel name (and ``''`` for the GPU worker registry) that database triggers bump
    whenever a best-config answer may have changed (migrations/versions/0003_best_versions.py); the
    API's answer cache is valid while the stamps it was computed under are unchanged."""

    __tablename__ = "best_versions"

    scope: Mapped[str] = mapped_column(String(128), primary_key=True)
    version: Mapped[int] = mapped_column(BigInteger)


class JobIdempotencyKey(Base):
    """The job a client's ``Idempotency-Key`` created (migrations/versions/0007_job_idempotency_keys.py)."""

    __tablename__ = "job_idempotency_keys"

    owner: Mapped[str] = mapped_column(String(128), primary_key=True)
    key: Mapped[str] = mapped_column(String(255), primary_key=True)
    job_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("jobs.id", ondelete="CASCADE"))
    request_hash: Mapped[str] = mapped_column(String(64))
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())


class ModelProfile(Base):
    """A model's inference profile from ``kernelfarm profile-model``: the whole report as JSON, and the
    fields it is listed and filtered by."""

    __tablename__ = "model_profiles"
    __table_args__ = (Index("ix_model_profiles_created", "created_at"),)

    id: Mapped[uuid.UUID] = mapped_column(UUID(as_uuid=True), primary_key=True, default=uuid.uuid4)
    model: Mapped[str] = mapped_column(String(256))
    device_name: Mapped[str] = mapped_column(String(128))
    gpu_model: Mapped[str] = mapped_column(String(128), index=True)
    dtype: Mapped[str] = mapped_column(String(16))
    batch: Mapped[int] = mapped_column(Integer)
    seq: Mapped[int] = mapped_column(Integer)
    latency_ms: Mapped[float] = mapped_column(Float)
    report: Mapped[dict[str, Any]] = mapped_column(JSONB)
    owner: Mapped[str] = mapped_column(String(128))
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())
