"""Files replaced atomically: a temporary file in the same folder, then renamed over the old one, so that
a full disk or an interrupted run leaves the previous file or none, never half a one, and no temporary
file. The CLI's exports, the model profiler's reports and the SDK's lookup cache write through it."""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Callable
from pathlib import Path


def write_atomically(
    path: Path, write: Callable[[Path], object], *, mode: int | None = None, durable: bool = True
) -> None:
    """``write(tmp)`` fills a temporary path next to ``path``, which then replaces ``path``.

    Args:
        mode: the new file's permission bits; None: the old file's, or for a new file what ``open``
            would give (0o666 less the umask). mkstemp's 0o600 would otherwise outlive the rename.
        durable: fsync before the rename, so that ENOSPC and EIO show here, not after it.

    Raises:
        OSError: the temporary file could not be made, written or renamed (it is removed).
    """
    if mode is None:
        mode = path.stat().st_mode & 0o7777 if path.exists() else 0o666 & ~_umask()
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    os.close(fd)
    try:
        write(Path(tmp))
        if durable:
            fd = os.open(tmp, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def write_text_atomically(path: Path, text: str, *, mode: int | None = None, durable: bool = True) -> None:
    """``text`` (UTF-8) into ``path``, as :func:`write_atomically` writes."""
    write_atomically(path, lambda tmp: tmp.write_text(text, encoding="utf-8"), mode=mode, durable=durable)


def _umask() -> int:
    current = os.umask(0)
    os.umask(current)
    return current
