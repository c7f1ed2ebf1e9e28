"""Writing the report's files: each one atomically (a temporary file in the same folder, then renamed over
the old one), so that a full disk or an interrupted run leaves the previous file or none, never half a one."""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Callable
from pathlib import Path


class OutputError(OSError):
    """A file of the report could not be written (``str()`` says which and why, in one line)."""


def write_atomically(path: Path, write: Callable[[Path], None]) -> None:
    """``write(tmp)`` writes the content to a temporary path next to ``path``, which then replaces ``path``.

    Raises:
        OutputError: the folder or the file could not be written (nothing is left behind).
    """
    tmp: str | None = None
    try:
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
        os.close(fd)
        os.chmod(tmp, 0o644)  # mkstemp's 0600 would outlive the rename: a report is for reading
        write(Path(tmp))
        os.replace(tmp, path)
    except OSError as exc:
        if tmp is not None:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
        raise OutputError(f"cannot write {path}: {exc.strerror or exc}") from None


def write_text(path: Path, text: str) -> None:
    def write(tmp: Path) -> None:
        with tmp.open("w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())  # ENOSPC and EIO show here, not after the rename

    write_atomically(path, write)
