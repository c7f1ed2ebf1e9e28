"""core/files.read_bounded: a file a user names is read only when it is a regular file, and only up to
a limit. ``Path.read_bytes`` read /dev/zero and a sparse file of gigabytes until the machine ran out of
memory, and waited forever on a FIFO nobody wrote to.

Nothing here can eat memory should the bound regress: the endless and the huge files are read under a
``limit`` far below what would hurt, and a FIFO in a thread that the test stops waiting for."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from kernelfarm.core.files import RefusedFile, read_bounded, size_text


def test_a_regular_file_within_the_limit_is_read_whole(tmp_path: Path) -> None:
    path = tmp_path / "exact"
    path.write_bytes(b"x" * 1024)
    assert read_bounded(path, 1024) == b"x" * 1024  # exactly the limit: read
    path.write_bytes(b"")
    assert read_bounded(path, 1024) == b""


def test_a_file_larger_than_the_limit_is_refused_naming_it_and_the_limit(tmp_path: Path) -> None:
    path = tmp_path / "big"
    path.write_bytes(b"x" * 1025)
    with pytest.raises(RefusedFile) as refused:
        read_bounded(path, 1024)
    assert refused.value.strerror == "larger than the limit of 1 KiB" and refused.value.filename == str(path)
    assert isinstance(refused.value, OSError)  # callers word it as any file they cannot read


def test_a_sparse_file_of_gigabytes_is_refused_without_reading_it(tmp_path: Path) -> None:
    path = tmp_path / "sparse"
    try:
        with path.open("wb") as handle:
            handle.truncate(8 << 30)  # no blocks on disk, 8 GiB to a reader
        with pytest.raises(RefusedFile, match="larger than the limit of 64 KiB"):
            read_bounded(path, 64 << 10)
    finally:
        path.unlink()  # pytest keeps recent temporary folders: no 8 GiB file left in one


@pytest.mark.parametrize(
    ("path", "kind"), [("/dev/zero", "a character device"), ("/dev/null", "a character device"), (".", "a folder")]
)
def test_what_is_not_a_regular_file_is_refused(path: str, kind: str) -> None:
    with pytest.raises(RefusedFile) as refused:
        read_bounded(Path(path), 1 << 20)
    assert refused.value.strerror == f"not a regular file ({kind})"


def test_a_fifo_nobody_writes_to_is_refused_at_once(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    outcome: list[BaseException | bytes] = []

    def read() -> None:
        try:
            outcome.append(read_bounded(fifo, 1024))
        except BaseException as exc:  # reported below, whatever it is
            outcome.append(exc)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    reader.join(10)
    if reader.is_alive():  # it blocked in open(): a writer lets it go, so no thread is left behind
        with open(fifo, "wb"):
            pass
        reader.join(10)
        pytest.fail("read_bounded waited on a FIFO nobody wrote to")
    [refused] = outcome
    assert isinstance(refused, RefusedFile) and refused.strerror == "not a regular file (a FIFO)"


def test_a_file_of_proc_whose_size_says_zero_is_read(tmp_path: Path) -> None:
    """/proc's files are regular files of st_size 0: read for what they hold, within the limit."""
    assert read_bounded(Path("/proc/self/cmdline"), 1 << 20)
    with pytest.raises(RefusedFile, match="larger than the limit of 4 bytes"):
        read_bounded(Path("/proc/self/cmdline"), 4)


def test_what_cannot_be_opened_is_the_os_error(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        read_bounded(tmp_path / "missing", 1024)
    with pytest.raises(OSError, match="File name too long"):
        read_bounded(tmp_path / ("x" * 300), 1024)


def test_sizes_are_shown_in_the_largest_whole_unit() -> None:
    assert [size_text(n) for n in (64 << 10, 8 << 20, 2 << 30, 1000, 1536)] == [
        "64 KiB", "8 MiB", "2 GiB", "1000 bytes", "1536 bytes"
    ]  # fmt: skip
