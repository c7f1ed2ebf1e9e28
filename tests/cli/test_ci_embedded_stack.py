"""The pipeline's path on the embedded stack (`kernelfarm up`: PostgreSQL and redis-server from the
wheels, replay workers), only through the CLI and the stack's own token: tune on "main", export the
baseline, then `kernelfarm ci gate` passes for the same kernel and fails for a simulated regression."""

from __future__ import annotations

import csv
import io
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.cli.test_embedded_stack import RTX3090, run

SEED, BUDGET = 11, 24

GATE = """
baseline = "baseline.json"
threshold = 0.05
timeout = 240

[[entry]]
kernel = "convolution_kernel"
gpu = "NVIDIA GeForce RTX 3090"
problem = {{ size_x = 4096, size_y = 4096 }}
mode = "tune"
budget_trials = {budget}
parallelism = 1
seed = {seed}
{space}
"""


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    state_dir = tmp_path_factory.mktemp("ci-stack")
    started = run(state_dir, "up", "--detach", "--workers", "2")
    assert started.returncode == 0, started.stdout + started.stderr
    try:
        yield state_dir
    finally:
        run(state_dir, "down")


def test_gate_on_the_embedded_stack(stack: Path) -> None:
    # main's pipeline: tune (sequentially, so the seed replays the same search) and pin the export.
    tuned = run(stack, "tune", "convolution_kernel", "--gpu", RTX3090, "--budget", str(BUDGET), "--parallelism", "1",
                "--seed", str(SEED), "--profile", "none")  # fmt: skip
    assert tuned.returncode == 0, tuned.stdout + tuned.stderr
    job_id = re.search(r"job (\S+) submitted", tuned.stdout).group(1)  # type: ignore[union-attr]
    work = stack.parent / f"{stack.name}-ci"
    work.mkdir()
    exported = run(stack, "export", "convolution_kernel", "--format", "json", "--out", str(work / "baseline.json"))
    assert exported.returncode == 0, exported.stderr

    # The pull request's pipeline: the same kernel, tuned the same way, passes.
    (work / "gate.toml").write_text(GATE.format(budget=BUDGET, seed=SEED, space=""))
    passed = run(stack, "ci", "gate", str(work / "gate.toml"), "--run-id", "pr-1", "--junit", str(work / "junit.xml"))
    assert passed.returncode == 0, passed.stdout + passed.stderr
    assert 'failures="0"' in (work / "junit.xml").read_text()

    # A simulated regression: the candidate can only compile the slowest config main's search measured.
    trials = run(stack, "export", "convolution_kernel", "--format", "csv", "--job", job_id)
    rows = [r for r in csv.DictReader(io.StringIO(trials.stdout)) if r["state"] == "complete"]
    slowest = max(rows, key=lambda r: float(r["time_ms"]))
    names = list(rows[0])[len(("seq", "config_key", "state", "time_ms", "time_p20_ms", "time_p80_ms", "verified",
                                "failure_kind")):]  # fmt: skip
    space = "space = { parameters = { " + ", ".join(f"{n} = [{slowest[n]}]" for n in names) + " } }"
    (work / "gate.toml").write_text(GATE.format(budget=1, seed=SEED, space=space))
    failed = run(stack, "ci", "gate", str(work / "gate.toml"), "--run-id", "pr-2", "--summary", str(work / "s.md"))
    assert failed.returncode == 1, failed.stdout + failed.stderr
    assert "regression" in (work / "s.md").read_text() and slowest["config_key"] in (work / "s.md").read_text()
