"""What the deployment files run and set must exist: every ``kernelfarm ...`` command line parses
against the real CLI, every ``kernelfarm-healthcheck ...`` against the health-check script, and
every environment variable is a setting that core/settings.py reads (or a known CUDA/runtime one)."""

from __future__ import annotations

from typing import Any

import pytest
import typer

from kernelfarm.core.settings import Settings
from tests.deploy.sources import CommandUse, command_uses, documented_commands, environment_names, healthcheck_module

# Read by something other than kernelfarm's Settings: CUDA, CuPy, the NVIDIA runtime, Python.
FOREIGN_ENV = {
    "CUDA_VISIBLE_DEVICES",
    "CUDA_DEVICE_ORDER",
    "CUPY_CACHE_DIR",
    "CUDA_HOME",  # read by cuda.pathfinder (worker/cuda/toolkit_headers.py)
    "NVIDIA_VISIBLE_DEVICES",
    "NVIDIA_DRIVER_CAPABILITIES",
    "HOME",
    "PATH",
    "VIRTUAL_ENV",
    "PYTHONUNBUFFERED",
    "PYTHONDONTWRITEBYTECODE",
}


def _click_exception() -> type[Exception]:
    # Recent typer releases carry their own copy of click; older ones use the click package.
    try:
        from typer import _click
    except ImportError:
        import click

        return click.ClickException
    return _click.ClickException


ClickException = _click_exception()


def check_kernelfarm(argv: tuple[str, ...]) -> None:
    """Walk the command groups, then let click parse the rest exactly as it would at run time
    (unknown options, missing values and bad types all raise)."""
    from kernelfarm.cli import app

    command: Any = typer.main.get_command(app)
    path = ["kernelfarm"]
    args = list(argv[1:])
    while hasattr(command, "commands"):  # a group
        assert args, f"`{' '.join(path)}` needs a subcommand"
        name = args.pop(0)
        sub = command.commands.get(name)
        assert sub is not None, f"`{' '.join(path)}` has no subcommand {name!r}"
        command, path = sub, [*path, name]
    command.make_context(" ".join(path), args, resilient_parsing=False)


def check_healthcheck(argv: tuple[str, ...]) -> None:
    try:
        healthcheck_module().parser().parse_args(list(argv[1:]))
    except SystemExit as exit_:
        raise AssertionError(f"kernelfarm-healthcheck rejects {argv[1:]}") from exit_


def check(use: CommandUse) -> None:
    program = use.argv[0]
    if program == "kernelfarm":
        check_kernelfarm(use.argv)
    elif program == "kernelfarm-healthcheck":
        check_healthcheck(use.argv)
    else:
        raise AssertionError(f"{use.where}: runs {program!r}, not a kernelfarm command")


USES = command_uses()


def test_the_files_run_the_expected_roles() -> None:
    commands = {use.argv[:2] for use in USES if use.argv[0] == "kernelfarm"}
    assert {("kernelfarm", "serve-api"), ("kernelfarm", "coordinator"), ("kernelfarm", "worker"),
            ("kernelfarm", "db")} <= commands  # fmt: skip


@pytest.mark.parametrize("use", USES, ids=lambda u: u.where)
def test_command_lines_parse_against_the_cli(use: CommandUse) -> None:
    check(use)


def test_documented_commands_parse_against_the_cli() -> None:
    uses = documented_commands()
    if not uses:
        pytest.skip("docs/DEPLOY.md has no kernelfarm command lines")
    failures = []
    for use in uses:
        try:
            check(use)
        except (AssertionError, ClickException) as error:
            failures.append(f"{use.where}: {' '.join(use.argv)}: {error}")
    assert not failures, "\n".join(failures)


def test_a_wrong_command_is_caught() -> None:
    with pytest.raises(ClickException):
        check_kernelfarm(("kernelfarm", "worker", "--backend", "cuda", "--gpus", "0"))
    with pytest.raises(AssertionError):
        check_kernelfarm(("kernelfarm", "migrate"))
    with pytest.raises(AssertionError):
        check_healthcheck(("kernelfarm-healthcheck", "ping"))


def settings_env_names() -> set[str]:
    names = {"DATABASE_URL", "REDIS_URL"}
    names |= {f"KERNELFARM_{field.upper()}" for field in Settings.model_fields}
    return names


def test_environment_names_are_real_settings() -> None:
    known = settings_env_names() | FOREIGN_ENV
    found = environment_names()
    assert {"DATABASE_URL", "REDIS_URL"} <= {name for _, name in found}
    unknown = sorted({f"{where}: {name}" for where, name in found if name not in known})
    assert not unknown, "not read by core/settings.py (typo?):\n" + "\n".join(unknown)
