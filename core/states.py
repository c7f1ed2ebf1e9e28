"""Lifecycle states and failure kinds. Failures are data, not exceptions."""

from __future__ import annotations

from enum import StrEnum


class JobState(StrEnum):
    QUEUED = "queued"  # accepted; waiting for a live worker of its GPU model or for its first dispatch
    RUNNING = "running"
    COMPLETE = "complete"
    FAILED = "failed"
    CANCELLED = "cancelled"

    @property
    def finished(self) -> bool:
        return self in (JobState.COMPLETE, JobState.FAILED, JobState.CANCELLED)


class TrialState(StrEnum):
    QUEUED = "queued"
    RUNNING = "running"
    COMPLETE = "complete"
    FAILED = "failed"
    CANCELLED = "cancelled"

    @property
    def finished(self) -> bool:
        return self in (TrialState.COMPLETE, TrialState.FAILED, TrialState.CANCELLED)


class FailureKind(StrEnum):
    COMPILE = "compile"
    LAUNCH = "launch"  # launch failure, e.g. too many resources requested
    TIMEOUT = "timeout"
    CRASH = "crash"  # illegal memory access, killed worker, ... (also: retry cap reached)
    WRONG_RESULT = "wrong_result"
    CONSTRAINT = "constraint"  # the config is outside what the kernel or recording allows


class ProfileMode(StrEnum):
    ALL = "all"
    TOP_K = "top_k"
    NONE = "none"
