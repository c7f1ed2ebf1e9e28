"""The chaos run of benchmarks/reliability/chaos.py (kernelfarm.testing.chaos), scaled down for CI: a 144-trial
job, 6 worker kills, 1 coordinator kill, 1 Redis flush-and-restart, 1 API restart, 1 PostgreSQL
restart and a worker stopped past its lease (all on servers this test starts). Every trial counted
once; the best equals the recording's."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from kernelfarm.testing.chaos import SCALES, run


def test_scaled_down_chaos_run_loses_nothing_and_counts_nothing_twice(tmp_path: Path) -> None:
    # The harness's embedded PostgreSQL runs as its own user when the suite runs as root: it must be
    # able to pass through this test's folder (pytest makes it 0700; the suite changes only its own).
    tmp_path.chmod(0o711)
    # The CI plan has no pause (one past the 15 s default lease cannot fit its 6 s job with `--defaults`);
    # with the test's fast clocks (4 s lease) one fits.
    report, verdict = run(replace(SCALES["ci"], worker_pauses=1), tmp_path / "chaos", rng_seed=3)
    faults = [fault for _, fault in report.events]
    assert faults.count("kill-worker") == 6 and faults.count("kill-coordinator") == 1
    assert {"flush-restart-redis", "restart-postgres", "restart-api", "pause-worker"} <= set(faults)
    assert verdict.job_state == "complete", report
    assert verdict.trials == verdict.expected == 144
    assert verdict.lost == [] and verdict.double_counted == [] and verdict.duplicate_configs == []
    assert verdict.changed_after_finish == [] and verdict.wrong_outcome == [] and verdict.extra == []
    assert verdict.best_ok, verdict.best_detail
