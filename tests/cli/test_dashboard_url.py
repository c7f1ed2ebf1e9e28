"""`kernelfarm up` tells the user where the dashboard is and which token logs in."""

from __future__ import annotations

import pytest

from kernelfarm.commands import stack_cmds
from kernelfarm.stack import StackState, WorkerPlan


def test_up_prints_the_dashboard_url_and_token(capsys: pytest.CaptureFixture[str]) -> None:
    state = StackState("postgresql://db", "redis://broker", "http://127.0.0.1:8123", "kf_admin-token")
    stack_cmds._describe(state, WorkerPlan("replay", 2, (), 0.0, 0.0))
    printed = capsys.readouterr().out
    assert "dashboard http://127.0.0.1:8123/ui/" in printed
    assert "kf_admin-token" in printed
