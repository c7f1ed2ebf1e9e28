"""An LLM arm's proposal is marked in the trial's provenance and survives the worker's result
write; the coordinator's history then knows the trial's origin (real schema)."""

from __future__ import annotations

import uuid

from kernelfarm.core.db import session_scope
from kernelfarm.core.measurement import Measurement, TimingStats
from kernelfarm.core.store import trials as trial_store
from kernelfarm.kernels.registry import get_kernel
from kernelfarm.tuner.history import observations
from tests.conftest import store_job

SPEC = get_kernel("cn_pnpoly")


def test_proposed_by_is_kept_through_the_result_and_read_back_as_origin(database_url: str) -> None:
    configs = [{"between_method": 0, "block_size_x": 32, "tile_size": t, "use_method": 0} for t in (1, 2)]
    keys = [SPEC.space.key(c) for c in configs]
    with session_scope(database_url) as session:
        job = store_job(session, SPEC.name, f"llm-{uuid.uuid4().hex[:8]}", strategy="bayes_llm")
        trials = trial_store.add_trials(session, job, list(zip(keys, configs, strict=True)), {keys[0]: "llm:m"})
        job_id, ids = job.id, [t.id for t in trials]
    for trial_id in ids:
        with session_scope(database_url) as session:
            claim = trial_store.claim(session, trial_id, "w1", None)
            assert claim is not None
            result = Measurement(timing=TimingStats.from_times([1.0]), verified=True, provenance={"worker": "w1"})
            assert trial_store.record_result(session, trial_id, claim.attempt, result)
    with session_scope(database_url) as session:
        stored = trial_store.history(session, job_id)
        assert stored[0].provenance == {"proposed_by": "llm:m", "worker": "w1"}
        assert stored[1].provenance == {"worker": "w1"}
        rows = trial_store.history_rows(session, job_id)
        assert [o.origin for o in observations(rows)] == ["llm", None]
