"""The embedded stack's default state dir is per user, not per working directory (issue 21.2): every
command finds the running stack from anywhere; KERNELFARM_STATE_DIR overrides it."""

from __future__ import annotations

from pathlib import Path

import pytest

from kernelfarm.core import settings as settings_module
from kernelfarm.core.settings import Settings


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    monkeypatch.delenv("KERNELFARM_STATE_DIR", raising=False)
    return monkeypatch


def test_a_user_s_default_is_their_xdg_state_dir(clean_env: pytest.MonkeyPatch, tmp_path: Path) -> None:
    clean_env.setattr(settings_module.os, "geteuid", lambda: 1000)
    clean_env.setenv("XDG_STATE_HOME", str(tmp_path))
    clean_env.chdir(tmp_path / "..")
    assert Settings().state_dir == tmp_path / "kernelfarm"  # absolute: the same from every directory


def test_root_s_default_is_var_lib(clean_env: pytest.MonkeyPatch) -> None:
    clean_env.setattr(settings_module.os, "geteuid", lambda: 0)
    assert Settings().state_dir == Path("/var/lib/kernelfarm")


def test_kernelfarm_state_dir_wins(clean_env: pytest.MonkeyPatch, tmp_path: Path) -> None:
    clean_env.setenv("KERNELFARM_STATE_DIR", str(tmp_path / "mine"))
    assert Settings().state_dir == tmp_path / "mine"
