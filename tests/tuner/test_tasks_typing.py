"""The coordinator's Celery tasks reach tuner/coordinator.py through a lazy import (tuner/tasks.py:
the strategies it brings must not slow the scheduler's start). What that import returns is typed, so
mypy checks every call through it: a misspelt step or a wrong argument fails ``make lint``, not a
job at run time. (Typed as a bare module, mypy accepted any attribute and any arguments.)"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import kernelfarm

# The folder that holds the package: mypy does not see an editable install's import hook.
PACKAGE_ROOT = Path(kernelfarm.__file__).resolve().parent.parent

MISUSE = """
    from kernelfarm.core.settings import get_settings
    from kernelfarm.tuner.tasks import _coordinator

    _coordinator().advance("job", get_settings(), "not a dispatch")
    _coordinator().housekeep(get_settings())
"""


def test_mypy_checks_the_calls_through_the_lazy_coordinator_import(tmp_path: Path) -> None:
    snippet = tmp_path / "snippet.py"
    snippet.write_text(textwrap.dedent(MISUSE))
    checked = subprocess.run(
        [sys.executable, "-m", "mypy", "--ignore-missing-imports", "--no-error-summary", "--cache-dir",
         str(tmp_path / "cache"), str(snippet)],
        cwd=tmp_path, env={**os.environ, "MYPYPATH": str(PACKAGE_ROOT)}, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    errors = checked.stdout
    assert 'Argument 3 to "advance"' in errors, errors
    assert 'has no attribute "housekeep"' in errors, errors
    assert errors.count("error:") == 2, errors
