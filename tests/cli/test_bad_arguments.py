"""Values no request can carry are one human line from the CLI, not a traceback from the HTTP client:
a number that is not finite (httpx: "Out of range float values are not JSON compliant"), text that is
not UTF-8 (an argument's invalid bytes, a JSON lone surrogate: UnicodeEncodeError), an integer longer
than Python converts (it became a string, and the server said "not a string"), JSON nested so deep
that decoding or encoding it ran out of recursion.

Each runs the installed CLI against an API address nobody listens on: nothing here needs the farm,
and a request that was sent would fail differently ("cannot reach the API")."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from kernelfarm.services import free_port

TUNE = ["tune", "convolution_kernel", "--gpu", "nvidia-geforce-rtx-3090", "--budget", "4", "--no-follow"]


def kernelfarm(
    tmp_path: Path, *args: str | bytes, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """The CLI, against an API address nobody listens on (unless ``env`` names another)."""
    env = {**os.environ, "KERNELFARM_STATE_DIR": str(tmp_path / "state"),
           "KERNELFARM_API_URL": f"http://127.0.0.1:{free_port()}", "KERNELFARM_API_TOKEN": "unused",
           **(env or {})}  # fmt: skip
    argv: list[str | bytes] = [sys.executable, "-P", "-m", "kernelfarm", *args]
    return subprocess.run(argv, env=env, capture_output=True, text=True, errors="replace", timeout=120)


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["-o", "n_init=NaN"], "--option 'n_init=NaN': not a finite number"),
        (["-o", "xi=1e999"], "--option 'xi=1e999': not a finite number"),
        (["-o", 'acquisition="\\ud800"'], "not valid UTF-8 text"),
        ([b"-o", b"acquisition=\xff"], "not valid UTF-8 text"),
        (["-o", "n_init=" + "1" * 5000], "an integer of 5000 digits: at most 4300"),
        (["--problem", "M=nan"], "--problem 'M=nan': not a finite number"),
        (["--problem", "M=" + "1" * 5000], "an integer of 5000 digits: at most 4300"),  # it was inf
        (["--set", "tile_size_x=1,nan"], "--set 'tile_size_x=1,nan': not a finite number"),
        (["--set", "tile_size_x=1,-" + "2" * 4301], "an integer of 4301 digits: at most 4300"),
        (["-o", "x=" + "[" * 500 + "]" * 500], "nested deeper than 32"),  # RecursionError in the encoder
        (["-o", "x=" + "[" * 5000], "nested deeper than 32"),  # ... in json.loads
        (["-o", "=1"], "entries look like name=value, got '=1'"),
    ],
)  # fmt: skip
def test_an_argument_no_request_can_carry_is_a_usage_error(tmp_path: Path, args: list[str | bytes], says: str) -> None:
    done = kernelfarm(tmp_path, *TUNE, *args)
    assert done.returncode == 2, done.stdout + done.stderr
    assert says in " ".join(done.stderr.replace("│", " ").split()), done.stderr  # rich wraps the usage panel
    assert "Traceback" not in done.stdout + done.stderr


def test_a_request_the_client_cannot_build_is_one_line_and_nothing_is_sent() -> None:
    """A body the HTTP client refuses to build (every CLI argument that could make one is refused
    above, but the Python client is called directly too) is the client's error, not a traceback
    from httpx; nothing listens at the address, so a request sent would fail differently."""
    from kernelfarm.client import ApiError, Client

    client = Client(f"http://127.0.0.1:{free_port()}", "unused")
    with client.http, pytest.raises(ApiError) as refused:
        client.submit({"kernel": "convolution_kernel", "problem": {"M": float("nan")}})
    assert refused.value.status == 0
    assert str(refused.value.detail) == "cannot send this request: Out of range float values are not JSON compliant"


def words(text: str) -> str:
    """``text`` with rich's usage-panel borders and line wrapping undone."""
    return " ".join(text.replace("│", " ").split())


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--worker-timeout", "nan"], "Invalid value for --worker-timeout: nan is not a finite number"),  # ran forever
        (["--worker-timeout", "inf"], "Invalid value for --worker-timeout: inf is not a finite number"),
        (["--worker-timeout", "-1"], "Invalid value for --worker-timeout: -1.0 is not a finite number of seconds >= 0"),
        (["--progress-every", "nan"], "Invalid value for --progress-every"),
        (["--budget-seconds", "nan"], "Invalid value for --budget-seconds: nan is not a finite number of seconds"),
    ],
)  # fmt: skip
def test_a_number_of_seconds_that_is_not_finite_is_a_usage_error_naming_the_option(
    tmp_path: Path, args: list[str], says: str
) -> None:
    done = kernelfarm(tmp_path, *TUNE, *args)
    assert done.returncode == 2, done.stdout + done.stderr
    assert says in words(done.stderr), done.stderr
    assert "Traceback" not in done.stdout + done.stderr


@pytest.mark.parametrize(
    ("args", "says"),
    [
        ([b"export", b"\xff"], "Invalid value for KERNEL: '\\udcff' is not valid UTF-8 text"),  # UnicodeEncodeError
        ([b"export", b"k", b"--gpu", b"\xff"], "Invalid value for --gpu: '\\udcff' is not valid UTF-8 text"),
        (["export", "k", "-f", "json", "--job", "4521"], "for --job: the json format exports best configs"),
        (["export", "-f", "csv", "--job", "4521", "--gpu", "g"], "--gpu and --problem filter best configs"),
        (["export", "-f", "csv"], "the csv format exports a job's trials: give --job"),
        (["export", "-f", "header"], "Invalid value for KERNEL: the header format exports one kernel's best configs"),
        (["export", "-f", "csv", "--job", "xyz!"], "'xyz!' is not a job id or a prefix of one"),
        ([b"token", b"revoke", b"\xff"], "Invalid value for NAME: '\\udcff' is not valid UTF-8 text"),  # SQLAlchemy's
        ([b"token", b"create", b"--scope", b"read", b"--name", b"\xff"], "Invalid value for --name"),
    ],
)  # fmt: skip
def test_export_and_token_arguments_are_checked_before_anything_is_sent(
    tmp_path: Path, args: list[str | bytes], says: str
) -> None:
    done = kernelfarm(tmp_path, *args)
    assert done.returncode == 2, done.stdout + done.stderr
    assert says in words(done.stderr), done.stderr
    assert "Traceback" not in done.stdout + done.stderr


def test_an_export_destination_that_cannot_be_written_is_one_line(tmp_path: Path) -> None:
    """Checked before the API is asked (nothing listens there: "cannot reach the API" would mean it was)."""
    (tmp_path / "a-file").write_text("keep\n")
    for args, says in [
        (["-o", str(tmp_path / "nodir" / "x")], f"cannot write {tmp_path}/nodir/x: no folder {tmp_path}/nodir"),
        (["-o", str(tmp_path)], f"cannot write {tmp_path}: it is a folder (--out names the file to write)"),
        (["-f", "triton", "-o", str(tmp_path / "a-file")], f"cannot write into {tmp_path}/a-file: it is a file"),
    ]:
        done = kernelfarm(tmp_path, "export", "convolution_kernel", *args)
        assert done.returncode == 1 and done.stdout == "", done.stdout + done.stderr
        assert done.stderr.startswith(f"error: {says}") and done.stderr.count("\n") == 1, done.stderr
    assert (tmp_path / "a-file").read_text() == "keep\n"


def test_errors_go_to_stderr_and_leave_json_output_clean(tmp_path: Path) -> None:
    for args in (["best", "convolution_kernel", "--gpu", "g", "--json"], ["jobs", "--json"], ["kernels", "--json"]):
        done = kernelfarm(tmp_path, *args)
        assert done.returncode == 1 and done.stdout == "", done.stdout
        assert done.stderr.startswith("error: cannot reach the API at http://127.0.0.1:"), done.stderr


def test_a_kernel_name_with_a_slash_is_refused_by_name_not_as_not_found(tmp_path: Path) -> None:
    """`kernel show a/b` was "error: Not Found" (the server decodes %2F before routing)."""
    done = kernelfarm(tmp_path, "kernel", "show", "a/b")
    assert done.returncode == 1
    assert done.stderr == "error: no kernel has the name 'a/b' (a kernel's name has no '/')\n"


def test_text_is_printed_as_written_never_as_an_emoji_code(tmp_path: Path) -> None:
    """rich's consoles replaced ":b:" in what they print (a user's or the server's text) with an emoji."""
    done = kernelfarm(tmp_path, "kernel", "show", "x/:b:")
    assert done.stderr == "error: no kernel has the name 'x/:b:' (a kernel's name has no '/')\n"
    done = kernelfarm(tmp_path, "profile-model", "x:b:y")
    assert (
        done.stderr
        == "error: model 'x:b:y': 'b:y' is not a function name (give module:function, e.g. mypkg.models:build)\n"
    )


def test_segments_are_quoted_dots_too() -> None:
    from kernelfarm.client import ApiError, segment

    assert segment("..", "kernel") == "%2E%2E" and segment(".", "kernel") == "%2E"  # were resolved away
    assert segment("a?b#c d", "kernel") == "a%3Fb%23c%20d" and segment("a.b", "kernel") == "a.b"
    with pytest.raises(ApiError, match="not valid UTF-8 text"):
        segment("\udcff", "kernel")
