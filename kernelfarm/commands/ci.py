"""``kernelfarm ci``: gate a pipeline on kernel performance (docs/CI.md).

``kernelfarm ci gate CONFIG``: measure each entry's candidate and the pinned baseline in this run,
exit 1 on a regression beyond the threshold (2: an entry could not be checked).
``kernelfarm ci recheck CONFIG``: re-measure pinned configs, re-tune where the driver, CUDA, NVRTC
or Triton version changed, exit 1 when an entry's best changed.
Both write a markdown summary and JUnit XML when asked.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from pathlib import Path

import typer
from rich.console import Console

from kernelfarm.client import ApiError
from kernelfarm.commands.jobs import fail
from kernelfarm.context import cli_context
from kernelfarm.gate.config import ConfigError, GateConfig, load_config
from kernelfarm.gate.report import junit, markdown
from kernelfarm.gate.verdicts import Verdict, run_gate, run_recheck
from kernelfarm.sdk.client import Client

console = Console()
ci_app = typer.Typer(help="Gate CI pipelines on kernel performance (docs/CI.md).", no_args_is_help=True)

RunId = typer.Option(None, "--run-id", envvar="GITHUB_RUN_ID",
                     help="names this pipeline run: a retried step reuses its jobs (default: a new id)")  # fmt: skip
Summary = typer.Option(None, "--summary", help="write a markdown summary here")
Junit = typer.Option(None, "--junit", help="write JUnit XML here")
Poll = typer.Option(1.0, "--poll", help="seconds between job status reads")


@ci_app.command()
def gate(
    config: Path, run_id: str = RunId, summary: Path = Summary, junit_xml: Path = Junit, poll: float = Poll
) -> None:
    """Fail (exit 1) when a candidate is slower than the pinned baseline re-measured in this run."""
    _run("kernelfarm ci gate", config, run_id, summary, junit_xml, lambda c, cfg, rid: run_gate(c, cfg, rid, poll))


@ci_app.command()
def recheck(
    config: Path, run_id: str = RunId, summary: Path = Summary, junit_xml: Path = Junit, poll: float = Poll,
    force: bool = typer.Option(False, help="re-tune even where the toolchain did not change"),
) -> None:  # fmt: skip
    """Re-measure pinned configs; where the toolchain changed, re-tune and fail (exit 1) when a best changed."""
    _run("kernelfarm ci recheck", config, run_id, summary, junit_xml,
         lambda c, cfg, rid: run_recheck(c, cfg, rid, force=force, poll=poll))  # fmt: skip


Check = Callable[[Client, GateConfig, str], list[Verdict]]


def _format(path: Path) -> str:
    """How load_config reads ``path``: JSON for *.json, else TOML."""
    return "JSON" if path.suffix == ".json" else "TOML"


def _run(
    title: str, config_path: Path, run_id: str | None, summary: Path | None, junit_xml: Path | None, check: Check
) -> None:
    try:
        config = load_config(config_path)
    except ConfigError as exc:
        fail(str(exc), 2)
    except UnicodeDecodeError:
        fail(f"{config_path} is not valid {_format(config_path)}: not UTF-8 text", 2)
    except RecursionError:
        fail(f"{config_path} is not valid {_format(config_path)}: nested too deeply", 2)
    except ValueError as exc:  # an integer longer than Python converts
        fail(f"{config_path} is not valid {_format(config_path)}: {exc}", 2)
    run_id = run_id or uuid.uuid4().hex
    try:
        verdicts = check(cli_context().sdk_client(), config, run_id)
    except ConfigError as exc:
        fail(str(exc), 2)
    except UnicodeDecodeError:  # an export the config names
        fail(f"an export {config_path} names (baseline, candidate) is not UTF-8 text", 2)
    except RecursionError:
        fail(f"an export {config_path} names (baseline, candidate) is nested too deeply", 2)
    except ApiError as exc:
        fail(exc.message, 2)
    text = markdown(title, verdicts, run_id)
    console.print(text, markup=False, highlight=False)
    if summary is not None:
        summary.write_text(text)
    if junit_xml is not None:
        junit_xml.write_text(junit(title.replace(" ", "-"), verdicts))
    if any(v.status == "error" for v in verdicts):
        raise typer.Exit(2)
    if any(v.status != "pass" for v in verdicts):
        raise typer.Exit(1)
