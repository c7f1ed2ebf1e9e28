"""A wrong KERNELFARM_* variable is one human line naming the variable, not pydantic's traceback."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest


def kernelfarm(tmp_path: Path, **variables: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "KERNELFARM_STATE_DIR": str(tmp_path / "state"), **variables}
    return subprocess.run([sys.executable, "-P", "-m", "kernelfarm", "status"], env=env, capture_output=True,
                          text=True, timeout=120)  # fmt: skip


@pytest.mark.parametrize(
    ("variables", "says"),
    [
        ({"KERNELFARM_LLM_TIMEOUT_SECONDS": "-1"},
         "KERNELFARM_LLM_TIMEOUT_SECONDS: Input should be greater than 0 (got '-1')"),
        ({"KERNELFARM_LLM_TIMEOUT_SECONDS": "nan"}, "KERNELFARM_LLM_TIMEOUT_SECONDS: Input should be a finite number"),
        ({"KERNELFARM_PRESENCE_SWEEP_SECONDS": "x" * 1000}, "(got '" + "x" * 64 + "'...)"),  # not echoed whole
    ],
)  # fmt: skip
def test_a_wrong_setting_is_one_line_naming_the_variable(tmp_path: Path, variables: dict[str, str], says: str) -> None:
    done = kernelfarm(tmp_path, **variables)
    assert done.returncode == 1
    assert done.stderr.startswith("error: invalid setting: ") and says in done.stderr, done.stderr[-2000:]
    assert "Traceback" not in done.stderr and len(done.stderr.splitlines()) <= 2
