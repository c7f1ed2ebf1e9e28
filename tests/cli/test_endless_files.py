"""Files that never end, or are far larger than anything they could validly hold, are one line and a
non-zero exit, read no further than a limit: `ci gate /dev/zero` was killed for memory at 23 GB, as was a
gate config whose baseline is /dev/zero, `profile-model --ceilings /dev/zero` and `kernel add` of a 6 GB
sparse manifest; `kernel add` of a manifest naming a FIFO in its folder waited forever. And a file that
is not the format expected is never quoted: a baseline of /proc/self/environ printed the environment.

Each runs the installed CLI against an API address nobody listens on (tests/cli/test_bad_arguments.py),
under a limit of its address space and a timeout: should the bound regress, the command fails for
memory (a MemoryError traceback) or times out, and the machine is never at risk. The sparse files take
no disk, and are removed by the test itself (pytest keeps recent temporary folders)."""

from __future__ import annotations

import json
import os
import resource
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from kernelfarm.services import free_port
from tests.cli.test_gate_hardening import write_baseline, write_config

USER_KERNEL = Path(__file__).resolve().parents[1] / "data" / "user_kernel"
MEMORY_LIMIT = 2 << 30  # the CLI needs a few hundred MB of address space; reading any file below whole, more
SPARSE_SIZE = 8 << 30  # beyond MEMORY_LIMIT: a read of it whole fails for memory at once
SECRET = "kf-probe-secret-5e1f"  # in the environment of the command reading /proc/self/environ


def _limit_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))


def kernelfarm(tmp_path: Path, *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """The CLI in ``tmp_path``, bounded in memory and time, against an address nobody listens on."""
    env = {**os.environ, "KERNELFARM_STATE_DIR": str(tmp_path / "state"), "KERNELFARM_API_TOKEN": "unused",
           "KERNELFARM_API_URL": f"http://127.0.0.1:{free_port()}", "PROBE_SECRET": SECRET}  # fmt: skip
    done = subprocess.run([sys.executable, "-P", "-m", "kernelfarm", *args], env=env, cwd=tmp_path, text=True,
                          capture_output=True, errors="replace", timeout=timeout, preexec_fn=_limit_memory)  # fmt: skip
    assert "Traceback" not in done.stdout + done.stderr, done.stderr[-2000:]
    return done


def one_line(done: subprocess.CompletedProcess[str], code: int) -> str:
    """The command's one error line (it exited ``code``)."""
    lines = done.stderr.splitlines()
    assert done.returncode == code and len(lines) == 1 and lines[0].startswith("error: "), done.stderr[-2000:]
    return lines[0]


@pytest.fixture
def sparse(tmp_path: Path) -> Iterator[Path]:
    """A folder whose ``huge`` file is SPARSE_SIZE bytes of nothing, on no disk; removed afterwards."""
    folder = tmp_path / "sparse"
    folder.mkdir()
    huge = folder / "huge"
    with huge.open("wb") as handle:
        handle.truncate(SPARSE_SIZE)
    try:
        yield folder
    finally:
        for path in folder.iterdir():
            if path.is_file() and path.stat().st_size >= SPARSE_SIZE:
                path.unlink()


# ---------------------------------------------------------------------------------------------- ci gate
def test_a_gate_config_that_never_ends_or_is_huge_is_one_line(tmp_path: Path, sparse: Path) -> None:
    said = one_line(kernelfarm(tmp_path, "ci", "gate", "/dev/zero"), 2)
    assert said == "error: cannot read /dev/zero: not a regular file (a character device)"
    config = (sparse / "huge").rename(sparse / "gate.toml")
    said = one_line(kernelfarm(tmp_path, "ci", "gate", str(config)), 2)
    assert said == f"error: cannot read {config}: larger than the limit of 16 MiB"


@pytest.mark.parametrize("baseline", ["/dev/zero", "huge"])
def test_a_baseline_export_that_never_ends_or_is_huge_is_one_line(tmp_path: Path, sparse: Path, baseline: str) -> None:
    config = write_config(sparse, baseline=baseline)
    said = one_line(kernelfarm(tmp_path, "ci", "gate", str(config)), 2)
    if baseline == "/dev/zero":
        assert said == "error: cannot read the export /dev/zero: not a regular file (a character device)"
    else:
        assert said == f"error: cannot read the export {sparse / 'huge'}: larger than the limit of 128 MiB"


def test_an_export_that_is_not_json_is_not_quoted(tmp_path: Path) -> None:
    """The process environment, holding the secret, is the file named: the error says it is not JSON,
    and shows none of it."""
    config = write_config(tmp_path, baseline="/proc/self/environ")
    done = kernelfarm(tmp_path, "ci", "gate", str(config))
    said = one_line(done, 2)
    assert said == (
        "error: /proc/self/environ: not a kernelfarm.best-export file: the file: invalid JSON: "
        "expected value at line 1 column 1"
    )
    assert SECRET not in done.stdout + done.stderr and "KERNELFARM" not in said


def test_an_export_that_is_json_but_not_a_table_is_not_quoted(tmp_path: Path) -> None:
    (tmp_path / "baseline.json").write_text(json.dumps(f"PROBE_SECRET={SECRET}"))
    said = one_line(kernelfarm(tmp_path, "ci", "gate", str(write_config(tmp_path))), 2)
    assert said == f"error: {tmp_path / 'baseline.json'}: not a kernelfarm.best-export file: the file: input " + (
        "should be an object"
    )


def test_a_baseline_within_the_limit_is_still_read(tmp_path: Path) -> None:
    """The bound changes nothing for an export that fits: the gate reads it and goes on to the farm,
    which nobody serves here."""
    write_baseline(tmp_path)
    done = kernelfarm(tmp_path, "ci", "gate", str(write_config(tmp_path)), "--run-id", "probe", "--poll", "0.01")
    assert done.returncode == 2 and "cannot reach" in done.stdout + done.stderr, done.stdout + done.stderr


# -------------------------------------------------------------------------------- profile-model --ceilings
CEILINGS = ["profile-model", "gpt2-tiny", "--device", "cpu", "--ceilings"]


def test_ceilings_that_never_end_are_huge_or_nest_deeply_are_one_line(tmp_path: Path, sparse: Path) -> None:
    said = one_line(kernelfarm(tmp_path, *CEILINGS, "/dev/zero"), 1)
    assert said == "error: --ceilings: cannot read /dev/zero: not a regular file (a character device)"
    said = one_line(kernelfarm(tmp_path, *CEILINGS, str(sparse / "huge")), 1)
    assert said == f"error: --ceilings: cannot read {sparse / 'huge'}: larger than the limit of 64 MiB"
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 100_000 + "]" * 100_000)  # RecursionError in json.loads
    said = one_line(kernelfarm(tmp_path, *CEILINGS, str(deep)), 1)
    assert said == f"error: --ceilings: {deep} is nested too deeply to read (a ceilings file is one object of numbers)"


# ---------------------------------------------------------------------------------------------- kernel add
@pytest.fixture
def kernel_folder(tmp_path: Path) -> Path:
    folder = tmp_path / "kernel"
    shutil.copytree(USER_KERNEL, folder)
    return folder


def test_a_huge_or_endless_manifest_is_refused_at_the_farm_s_limit(tmp_path: Path, sparse: Path) -> None:
    manifest = (sparse / "huge").rename(sparse / "huge.toml")
    said = one_line(kernelfarm(tmp_path, "kernel", "add", str(manifest)), 1)
    assert said == f"error: cannot read {manifest}: larger than the limit of 64 KiB"  # MAX_MANIFEST_BYTES
    (tmp_path / "zero.toml").symlink_to("/dev/zero")
    said = one_line(kernelfarm(tmp_path, "kernel", "add", "zero.toml"), 1)
    assert said == "error: cannot read zero.toml: not a regular file (a character device)"


def test_a_fifo_or_a_huge_file_named_by_the_manifest_is_refused(tmp_path: Path, kernel_folder: Path) -> None:
    manifest = kernel_folder / "axpb.toml"
    text = manifest.read_text()
    os.mkfifo(kernel_folder / "pipe.h")
    (kernel_folder / "pipe.toml").write_text(text.replace('"axpb_common.h"]', '"axpb_common.h", "pipe.h"]'))
    said = one_line(kernelfarm(tmp_path, "kernel", "add", str(kernel_folder / "pipe.toml"), timeout=30), 1)
    assert said == (
        f"error: the manifest names 'pipe.h', which is not a readable file next to it ({kernel_folder / 'pipe.h'}: "
        "not a regular file (a FIFO))"
    )
    big = kernel_folder / "big.h"
    try:
        with big.open("wb") as handle:
            handle.truncate(SPARSE_SIZE)
        (kernel_folder / "big.toml").write_text(text.replace('"axpb_common.h"]', '"axpb_common.h", "big.h"]'))
        said = one_line(kernelfarm(tmp_path, "kernel", "add", str(kernel_folder / "big.toml")), 1)
        assert said.endswith(f"({big}: larger than the limit of 512 KiB)"), said  # MAX_SOURCE_BYTES
    finally:
        big.unlink()


def test_a_manifest_and_files_within_the_limits_are_sent(tmp_path: Path, kernel_folder: Path) -> None:
    """Nothing listens: the upload that the bounds let through fails at the connection."""
    said = one_line(kernelfarm(tmp_path, "kernel", "add", str(kernel_folder / "axpb.toml")), 1)
    assert said.startswith("error: cannot reach the API"), said
