"""The example CI workflow (deploy/github-actions/): valid GitHub Actions syntax (the workflow schema
check-jsonschema vendors), every ``kernelfarm`` command in it parses against the real CLI, and the
example gate config loads."""

from __future__ import annotations

import shlex
import subprocess
import sys
from pathlib import Path

import typer
import yaml
from typer.core import TyperGroup

from kernelfarm.cli import app
from kernelfarm.gate.config import load_config

FOLDER = Path(__file__).resolve().parents[2] / "deploy" / "github-actions"


def test_workflow_is_valid_github_actions_syntax() -> None:
    checked = subprocess.run(
        [sys.executable, "-m", "check_jsonschema", "--builtin-schema", "vendor.github-workflows",
         str(FOLDER / "kernelfarm-ci.yml")], capture_output=True, text=True,
    )  # fmt: skip
    assert checked.returncode == 0, checked.stdout + checked.stderr


def kernelfarm_commands() -> list[list[str]]:
    workflow = yaml.safe_load((FOLDER / "kernelfarm-ci.yml").read_text())
    lines = [step["run"] for job in workflow["jobs"].values() for step in job["steps"] if "run" in step]
    return [shlex.split(line)[1:] for line in lines if line.startswith("kernelfarm ")]


def test_every_kernelfarm_command_parses_against_the_cli() -> None:
    commands = kernelfarm_commands()
    assert len(commands) == 2  # gate and recheck
    root = typer.main.get_command(app)
    for argv in commands:
        command = root
        rest = list(argv)
        # typer's own group class: recent typer releases carry their own copy of click, whose commands
        # are no click.Group (an isinstance check against the click package never walked into them)
        while isinstance(command, TyperGroup):
            assert rest, f"`kernelfarm {' '.join(argv)}` needs a subcommand"
            name = rest.pop(0)
            sub = command.commands.get(name)
            assert sub is not None, f"unknown command {name!r} in {argv}"
            command = sub
        command.make_context(command.name or "", rest)  # raises on an unknown option or a bad value


def test_example_gate_config_loads() -> None:
    config = load_config(FOLDER / "kernelfarm-ci.toml")
    assert [e.kernel for e in config.entry] == ["matmul_fp32", "softmax"]
    assert config.baseline == FOLDER / "kernelfarm-baseline.json" and config.entry[1].threshold == 0.08
