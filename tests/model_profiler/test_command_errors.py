"""`kernelfarm profile-model`'s bad arguments get one line and exit status 1, never a traceback, and the
checks that need no torch run before torch is imported: these runs block ``import torch`` (so they pass
on a machine without the `profile` extra, and prove the order)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from kernelfarm.model_profiler.output import OutputError, write_text

# `kernelfarm profile-model ...` with ``import torch`` failing as on a machine without torch.
NO_TORCH = (
    "import sys; sys.modules['torch'] = None; sys.argv[0] = 'kernelfarm'; from kernelfarm.cli import main; main()"
)


def start(*args: str, cwd: Path, torch: bool = False) -> subprocess.Popen[str]:
    command = ["-m", "kernelfarm"] if torch else ["-c", NO_TORCH]
    env = {**os.environ, "KERNELFARM_API_URL": "http://127.0.0.1:9", "KERNELFARM_STATE_DIR": str(cwd / "no-stack")}
    return subprocess.Popen([sys.executable, "-P", *command, "profile-model", *args], cwd=cwd, env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)  # fmt: skip


def finish(process: subprocess.Popen[str]) -> subprocess.CompletedProcess[str]:
    try:
        stdout, stderr = process.communicate(timeout=120)
    finally:
        process.kill()  # a no-op once it exited; never left running
    return subprocess.CompletedProcess(process.args, process.returncode, stdout, stderr)


def run(*args: str, cwd: Path, torch: bool = False) -> subprocess.CompletedProcess[str]:
    return finish(start(*args, cwd=cwd, torch=torch))


def one_line_error(done: subprocess.CompletedProcess[str], message: str) -> None:
    assert done.returncode == 1, (done.returncode, done.stderr)
    assert "Traceback" not in done.stderr, done.stderr
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), done.stderr
    assert message in lines[0], done.stderr


BAD_ARGUMENTS: list[tuple[list[str], str]] = [
    # checked before the model is built: not "sequence length 512 exceeds" (gpt2-tiny has 256 positions)
    (["gpt2-tiny", "--device", "bogus"], "unknown --device 'bogus': use cuda, cuda:N, cpu or auto"),
    (["gpt2-tiny", "--device", "cuda:x"], "unknown --device 'cuda:x'"),
    # a CPU has no GPU model to tune for: refused, nothing submitted, no wait
    (["gpt2-tiny", "--device", "cpu", "--tune"], "--tune needs a GPU"),
    ([":", "--device", "cpu"], "model ':': '' is not a module name"),
    (["mypkg.models:", "--device", "cpu"], "'' is not a function name"),
    ([".relative:build", "--device", "cpu"], "'.relative' is not a module name"),
    (["no-such-model", "--device", "cpu"], "unknown model 'no-such-model'"),
    (["gpt2-tiny", "--device", "cpu", "--dtype", "int8"], "unknown dtype 'int8'"),
    (["gpt2-tiny", "--device", "cpu", "--swap"], "--swap needs --tune"),
    (["gpt2-tiny", "--device", "cpu", "--out", "a-file"], "--out a-file exists and is not a folder"),
    (["gpt2-tiny", "--device", "cpu", "--out", "/dev/full"], "--out /dev/full exists and is not a folder"),
    (["gpt2-tiny", "--device", "cpu", "--ceilings", "missing.json"], "cannot read missing.json: No such file"),
    (["gpt2-tiny", "--device", "cpu", "--ceilings", "broken.json"], "broken.json is not JSON"),
    (["gpt2-tiny", "--device", "cpu", "--ceilings", "list.json"], "must hold a JSON object"),
    (["gpt2-tiny", "--device", "cpu", "--ceilings", "keys.json"], "keys.json lacks fp32_flops, tensor_flops"),
    (["gpt2-tiny", "--device", "cpu", "--ceilings", "zero.json"], "dram_bytes_per_s must be a number > 0"),
    (["gpt2-tiny", "--device", "cpu", "--ceilings", "latin1.json"], "latin1.json is not JSON"),
]


def test_a_bad_argument_is_one_line_before_torch(tmp_path: Path) -> None:
    (tmp_path / "a-file").write_text("not a folder")
    (tmp_path / "broken.json").write_text("{")
    (tmp_path / "list.json").write_text("[]")
    (tmp_path / "keys.json").write_text(json.dumps({"dram_bytes_per_s": 1e9, "fp32_flop": 1e12}))
    (tmp_path / "zero.json").write_text(json.dumps({"dram_bytes_per_s": 0, "fp32_flops": 1, "tensor_flops": 1}))
    (tmp_path / "latin1.json").write_bytes(b'{"how": "\xe9"}')
    before = sorted(p.name for p in tmp_path.iterdir())
    # all at once (each is a process of its own): seconds, not one interpreter start after another
    processes = [start(*args, cwd=tmp_path) for args, _ in BAD_ARGUMENTS]
    for (args, message), process in zip(BAD_ARGUMENTS, processes, strict=True):
        done = finish(process)
        try:
            one_line_error(done, message)
        except AssertionError as exc:
            raise AssertionError(f"profile-model {' '.join(args)}: {exc}") from None
    assert sorted(p.name for p in tmp_path.iterdir()) == before  # nothing written: no --out folder, no profile


def test_an_out_folder_that_cannot_be_made_is_one_line(tmp_path: Path) -> None:
    pytest.importorskip("torch", reason="building the model needs the `profile` extra (torch)")
    pytest.importorskip("transformers", reason="the built-in models need the `profile` extra (transformers)")
    done = run("gpt2-tiny", "--device", "cpu", "--seq", "8", "--batch", "1", "--out", "/proc/kf-no-such/out",
               cwd=tmp_path, torch=True)  # fmt: skip
    one_line_error(done, "cannot make the folder --out /proc/kf-no-such/out")


def test_a_file_is_written_atomically_or_not_at_all(tmp_path: Path) -> None:
    target = tmp_path / "profile.json"
    write_text(target, "old")
    write_text(target, "new")
    assert target.read_text() == "new" and target.stat().st_mode & 0o777 == 0o644
    (tmp_path / "report.md").mkdir()  # a file that cannot be replaced: the rename fails
    with pytest.raises(OutputError, match=r"cannot write .*report\.md: Is a directory"):
        write_text(tmp_path / "report.md", "text")
    with pytest.raises(OutputError, match="cannot write /proc/kf-no-such/x: No such file"):
        write_text(Path("/proc/kf-no-such/x"), "text")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["profile.json", "report.md"]  # no temporary file left
