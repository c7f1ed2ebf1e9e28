"""Writing the report's files: each one atomically (core/files.py), so that a full disk or an interrupted
run leaves the previous file or none, never half a one."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from kernelfarm.core import files


class OutputError(OSError):
    """A file of the report could not be written (``str()`` says which and why, in one line)."""


def write_atomically(path: Path, write: Callable[[Path], object]) -> None:
    """``write(tmp)`` writes the content to a temporary path next to ``path``, which then replaces ``path``
    (core/files.py), readable by all (0o644): a report is for reading.

    Raises:
        OutputError: the folder or the file could not be written (nothing is left behind).
    """
    try:
        files.write_atomically(path, write, mode=0o644)
    except OSError as exc:
        raise OutputError(f"cannot write {path}: {exc.strerror or exc}") from None


def write_text(path: Path, text: str) -> None:
    write_atomically(path, lambda tmp: tmp.write_text(text, encoding="utf-8"))
