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


def kernelfarm(tmp_path: Path, *args: str | bytes) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "KERNELFARM_STATE_DIR": str(tmp_path / "state"),
           "KERNELFARM_API_URL": f"http://127.0.0.1:{free_port()}", "KERNELFARM_API_TOKEN": "unused"}  # fmt: skip
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
