"""What the CLI prints from a real API (a process of its own on the test database): the server's text
as written, never read as rich markup ("[/x]" raised MarkupError; a name pattern's "[a-z]" was eaten),
always on stderr (`--json` output stays JSON); `export --job` refusing another kernel's job and taking an
id prefix; files written atomically; the admin commands' errors as one line."""

from __future__ import annotations

import os
import re
import resource
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kernelfarm.core.db import session_scope
from kernelfarm.core.store import trials as trial_store
from kernelfarm.kernels.registry import get_kernel
from tests.conftest import Farm, make_token, measure_trials, store_job

USER_KERNEL = Path(__file__).resolve().parents[1] / "data" / "user_kernel"
UNKNOWN_MARKUP = "unknown kernel '[/x]'"


@pytest.fixture(scope="module")
def api(database_url: str, redis_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    """The environment of a CLI run against the API (an admin token; DATABASE_URL is the test database)."""
    farm = Farm(database_url, redis_url, tmp_path_factory.mktemp("api-messages"))
    try:
        farm.start_api()
        token = make_token(database_url, "admin", name="cli-messages")
        yield {**os.environ, "KERNELFARM_API_URL": farm.api_url, "KERNELFARM_API_TOKEN": token, "COLUMNS": "200",
               "KERNELFARM_STATE_DIR": str(farm.directory / "no-stack")}  # fmt: skip
    finally:
        farm.stop_all()


@pytest.fixture(scope="module")
def job_id(database_url: str) -> str:
    """A convolution_kernel job with one measured trial, on a GPU model of this module alone."""
    spec = get_kernel("convolution_kernel")
    config = spec.space.valid_configs(dict(spec.default_problem))[0]
    with session_scope(database_url) as session:
        job = store_job(session, spec.name, "cli-messages-gpu")
        trial_ids = [t.id for t in trial_store.add_trials(session, job, [(spec.space.key(config), config)])]
        job_id = str(job.id)
    measure_trials(database_url, trial_ids)
    return job_id


def kernelfarm(env: dict[str, str], *args: str | bytes, **kwargs: Any) -> subprocess.CompletedProcess[str]:
    done = subprocess.run([sys.executable, "-P", "-m", "kernelfarm", *args], env=env, text=True, errors="replace",
                          stdout=kwargs.pop("stdout", subprocess.PIPE), stderr=subprocess.PIPE, timeout=120,
                          **kwargs)  # fmt: skip
    assert "Traceback" not in (done.stdout or "") + done.stderr, done.stderr
    return done


@pytest.mark.parametrize(
    "args",
    [
        ["tune", "[/x]", "--gpu", "foo", "--budget", "1"],
        ["best", "[/x]", "--gpu", "foo"],
        ["export", "[/x]"],
    ],
)
def test_server_text_that_looks_like_markup_is_printed_as_written(api: dict[str, str], args: list[str]) -> None:
    done = kernelfarm(api, *args)
    assert done.returncode == 1 and done.stdout == ""
    assert done.stderr.startswith(f"error: {UNKNOWN_MARKUP}; known: ["), done.stderr


def test_a_name_pattern_is_printed_with_its_brackets(api: dict[str, str], tmp_path: Path) -> None:
    folder = tmp_path / "kernel"
    shutil.copytree(USER_KERNEL, folder)
    manifest = folder / "axpb.toml"
    manifest.write_text(manifest.read_text().replace('name = "user-axpb"', 'name = "Bad Name"', 1))
    done = kernelfarm(api, "kernel", "add", str(manifest))
    assert done.returncode == 1 and done.stdout == ""
    assert "manifest.name: String should match pattern '^[a-z][a-z0-9_\\-]*$'" in done.stderr, done.stderr


def test_a_stored_description_that_looks_like_markup_is_shown_as_written(api: dict[str, str], tmp_path: Path) -> None:
    folder = tmp_path / "kernel"
    shutil.copytree(USER_KERNEL, folder)
    manifest = folder / "Evil.TOML"  # the suffix in upper case: read and sent as TOML
    text = (folder / "axpb.toml").read_text().replace('name = "user-axpb"', 'name = "markup-axpb"', 1)
    manifest.write_text(text.replace('description = "out = alpha * x + bias (bias per column), 2-D tiles"',
                                     'description = "[/x] [bold]evil"'))  # fmt: skip
    added = kernelfarm(api, "kernel", "add", str(manifest))
    assert added.returncode == 0, added.stderr
    shown = kernelfarm(api, "kernel", "show", "markup-axpb")
    assert shown.returncode == 0, shown.stderr
    assert "\n[/x] [bold]evil\n" in shown.stdout
    for args in (["kernel", "list"], ["kernel", "versions", "markup-axpb"], ["kernels"]):
        assert kernelfarm(api, *args).returncode == 0


def test_a_dot_name_reaches_the_kernel_route(api: dict[str, str]) -> None:
    """`kernel show ..` was "error: Not Found": the client resolved ".." away, to another route."""
    for name in ("..", "."):
        done = kernelfarm(api, "kernel", "show", name)
        assert done.returncode == 1 and done.stderr.startswith(f"error: unknown kernel '{name}'"), done.stderr
    done = kernelfarm(api, "kernel", "versions", "a?b")
    assert done.returncode == 1 and done.stderr.startswith("error: no uploaded kernel 'a?b'"), done.stderr


def test_export_refuses_another_kernels_job_and_takes_a_prefix(api: dict[str, str], job_id: str) -> None:
    other = kernelfarm(api, "export", "NOTAKERNEL", "-f", "csv", "--job", job_id)
    assert other.returncode == 2 and other.stdout == "", other.stdout  # it printed the other kernel's trials
    assert f"job {job_id} tuned convolution_kernel, not NOTAKERNEL" in " ".join(other.stderr.replace("│", " ").split())
    for args in (["convolution_kernel"], []):  # the kernel may be left out: the job names it
        done = kernelfarm(api, "export", *args, "-f", "csv", "--job", job_id[:8])
        assert done.returncode == 0, done.stderr
        header, row = done.stdout.splitlines()
        assert header.startswith("seq,config_key,state,time_ms,") and ",complete," in row


def test_export_of_an_unknown_job_prefix_is_one_line(api: dict[str, str], job_id: str) -> None:
    prefix = "4521" if not job_id.startswith("4521") else "4522"
    done = kernelfarm(api, "export", "-f", "csv", "--job", prefix)
    assert done.returncode == 1 and done.stderr == f"error: no job id starts with '{prefix}'\n"  # was pydantic's list


def test_errors_stay_out_of_json_output(api: dict[str, str]) -> None:
    done = kernelfarm(api, "best", "convolution_kernel", "--gpu", "cli-messages-nowhere", "--json")
    assert done.returncode == 1 and done.stdout == ""
    assert done.stderr.startswith("error: no verified measurement of convolution_kernel"), done.stderr


def test_a_failed_write_leaves_the_file_that_was_there(api: dict[str, str], tmp_path: Path) -> None:
    """A write cut short (here by a file-size limit: EFBIG; a full disk is ENOSPC) is one line, and the
    old file is intact: the export goes to a temporary file in the same folder, then replaces it."""
    old = tmp_path / "best.json"
    old.write_text("old\n")

    def small_files() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (64, 64))

    done = kernelfarm(api, "export", "convolution_kernel", "-o", str(old), preexec_fn=small_files)
    assert done.returncode == 1 and done.stderr == f"error: cannot write {old}: File too large\n", done.stderr
    assert old.read_text() == "old\n" and sorted(p.name for p in tmp_path.iterdir()) == ["best.json"]
    written = kernelfarm(api, "export", "convolution_kernel", "-o", str(old))
    assert written.returncode == 0 and written.stderr == f"wrote {old}\n"
    assert '"schema_name": "kernelfarm.best-export"' in old.read_text()


def test_a_full_device_is_one_line(api: dict[str, str]) -> None:
    done = kernelfarm(api, "export", "convolution_kernel", "-o", "/dev/full")
    assert done.returncode == 1 and done.stderr == "error: cannot write /dev/full: No space left on device\n"
    with open("/dev/full", "w") as full:
        done = kernelfarm(api, "export", "convolution_kernel", stdout=full)
    assert done.returncode == 1  # and nothing else: no "Exception ignored" at exit
    assert done.stderr == "error: cannot write to standard output: No space left on device\n", done.stderr


def test_admin_commands_refuse_in_one_line(api: dict[str, str], database_url: str) -> None:
    bogus = kernelfarm(api, "db", "upgrade", "bogusrev")
    assert bogus.returncode == 1 and bogus.stderr.startswith(
        "error: cannot upgrade to 'bogusrev': Can't locate revision identified by 'bogusrev'"
    ), bogus.stderr  # alembic's CommandError
    revoked = kernelfarm(api, "token", "revoke", "[/x]")  # a misspelt name must not read as done
    assert revoked.returncode == 1 and revoked.stderr == (
        "error: no token is named '[/x]' (`kernelfarm token list` shows them)\n"
    ), revoked.stderr
    make_token(database_url, "read", name="[/revoked twice]")
    revoked = kernelfarm(api, "token", "revoke", "[/revoked twice]")
    assert revoked.returncode == 0 and revoked.stdout == "revoked 1 token(s) named '[/revoked twice]'\n"
    revoked = kernelfarm(api, "token", "revoke", "[/revoked twice]")
    assert revoked.returncode == 0, revoked.stderr
    assert (
        revoked.stdout == "revoked 0 token(s) named '[/revoked twice]' (every token of that name was revoked before)\n"
    )
    revoked = kernelfarm(api, "token", "revoke", b"\xff")
    assert revoked.returncode == 2 and "is not valid UTF-8 text" in revoked.stderr  # SQLAlchemy's UnicodeEncodeError


def test_an_uploaded_description_s_control_characters_are_shown_escaped(api: dict[str, str], tmp_path: Path) -> None:
    """The probe's description: printed raw, it retitled the terminal (OSC 0), cleared it (CSI 2J) and
    turned what followed red. `kernel show` keeps the description's line breaks and tabs, and shows every
    other control character as its Python escape; `kernel add`, `list` and `versions` print none either."""
    folder = tmp_path / "kernel"
    shutil.copytree(USER_KERNEL, folder)
    manifest = folder / "axpb.toml"
    text = manifest.read_text().replace('name = "user-axpb"', 'name = "escape-axpb"', 1)
    probed = "hello \\u001b]0;PWNED\\u0007\\u001b[2J\\u001b[31mRED\\n\\tnext"  # TOML escapes
    manifest.write_text(text.replace('"out = alpha * x + bias (bias per column), 2-D tiles"', f'"{probed}"'))
    added = kernelfarm(api, "kernel", "add", str(manifest))
    assert added.returncode == 0, added.stderr
    shown = kernelfarm(api, "kernel", "show", "escape-axpb")
    assert shown.returncode == 0, shown.stderr
    # The line break kept, and the tab (rich prints it as spaces).
    assert re.search(r"\nhello \\x1b\]0;PWNED\\x07\\x1b\[2J\\x1b\[31mRED\n\s+next\n", shown.stdout), shown.stdout
    listed = [kernelfarm(api, "kernel", "list"), kernelfarm(api, "kernel", "versions", "escape-axpb")]
    for done in (added, shown, *listed):
        assert done.returncode == 0 and not any(c in done.stdout for c in "\x1b\x07\r"), done.stdout
