"""Files replaced atomically: a temporary file in the same folder, then renamed over the old one, so that
a full disk or an interrupted run leaves the previous file or none, never half a one, and no temporary
file. The CLI's exports, the model profiler's reports and the SDK's lookup cache write through it.

And files read with a bound (:func:`read_bounded`): a file the user names may never end (``/dev/zero``,
a FIFO no one writes to) or be far larger than anything it could validly hold (a sparse file of gigabytes);
``Path.read_bytes`` read such a file until the machine ran out of memory, or waited forever."""

from __future__ import annotations

import contextlib
import os
import stat
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


class RefusedFile(OSError):
    """A file :func:`read_bounded` does not read: not a regular file, or larger than its limit. An
    ``OSError`` whose ``strerror`` says why, so that a caller's wording of a file it cannot read
    ("cannot read PATH: <strerror>") words these too."""

    def __init__(self, path: Path, reason: str) -> None:
        super().__init__(None, reason, str(path))


def read_bounded(path: Path, limit: int) -> bytes:
    """The bytes of the regular file ``path``: at most ``limit`` of them, or it is refused.

    Raises:
        RefusedFile: ``path`` is not a regular file (a FIFO, a device, a folder, a socket), or it holds
            more than ``limit`` bytes; ``strerror`` says which, naming the limit.
        OSError: it cannot be opened or read (missing, no permission, a name too long).
        ValueError: a name no OS call can take (a NUL).
    """
    _refuse_irregular(path, os.stat(path).st_mode)  # before opening: opening a device may itself act
    # O_NONBLOCK: a FIFO swapped in since the stat must not block the open until someone writes to it.
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    with open(fd, "rb") as handle:
        _refuse_irregular(path, os.fstat(fd).st_mode)
        os.set_blocking(fd, True)
        # One byte more than the limit tells a file of exactly ``limit`` bytes from a larger one; st_size
        # is not trusted alone: /proc's files say 0 and a growing file more than it said.
        data = handle.read(limit + 1)
    if len(data) > limit:
        raise RefusedFile(path, f"larger than the limit of {size_text(limit)}")
    return data


def size_text(count: int) -> str:
    """``count`` bytes in the largest binary unit that holds it whole: 64 KiB, 8 MiB, 1000 bytes."""
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if count >= 1 << shift and count % (1 << shift) == 0:
            return f"{count >> shift} {unit}"
    return f"{count} bytes"


def _refuse_irregular(path: Path, mode: int) -> None:
    if not stat.S_ISREG(mode):
        raise RefusedFile(path, f"not a regular file ({_kind(mode)})")


def _kind(mode: int) -> str:
    kinds = ((stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
             (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"))  # fmt: skip
    return next((name for test, name in kinds if test(mode)), "not a file")


def _umask() -> int:
    current = os.umask(0)
    os.umask(current)
    return current
