"""Which finished trials to profile with Nsight Compute, and when.

ncu costs seconds of start-up per process, so profiles are taken in batches by a GPU worker, never
one per trial: in mode "all", every ``batch`` completed trials (and the remainder once the search
is done); in mode "top_k", the k fastest once the search is done, one batch per live worker of
the model (two ncu processes on one host slow each other down: for k = 5 on 2 x H200 the split
saved no wall time, 3.2-3.3 s vs 2.9 s alone; more kernels, or workers on separate hosts, gain);
in mode "none", never. A job is
complete only when the profiles it asked for have been answered (with metrics or an error).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from sqlalchemy.orm import Session

from kernelfarm.core.models import Job
from kernelfarm.core.states import ProfileMode
from kernelfarm.core.store import profiles as profile_store


@dataclass(frozen=True)
class ProfilePlan:
    batches: list[list[int]]  # trial ids, one list per worker.profile task
    outstanding: int  # requested and not yet answered, including the new batches


def plan_profiles(session: Session, job: Job, batch: int, search_done: bool, workers: int = 1) -> ProfilePlan:
    """The profile batches to send now. The top k, profiled when nothing else of the job is left to
    run, are split across the model's ``workers`` so each GPU takes a share in parallel."""
    mode = ProfileMode(job.profile)
    chosen: list[int] = []
    if mode == ProfileMode.ALL:
        pending = profile_store.unrequested_complete(session, job.id)
        full = len(pending) - len(pending) % batch
        chosen = pending if search_done else pending[:full]
    elif mode == ProfileMode.TOP_K and search_done:
        chosen = profile_store.fastest_unrequested(session, job.id, job.profile_top_k)
        batch = min(batch, max(1, math.ceil(len(chosen) / max(1, workers))))
    requested = profile_store.request_profiles(session, job.id, chosen)
    batches = [requested[i : i + batch] for i in range(0, len(requested), batch)]
    outstanding = profile_store.outstanding(session, job.id) if mode != ProfileMode.NONE else 0
    return ProfilePlan(batches, outstanding)
