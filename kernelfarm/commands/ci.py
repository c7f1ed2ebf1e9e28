"""``kernelfarm ci``: gate a pipeline on kernel performance (docs/CI.md).

``kernelfarm ci gate CONFIG``: measure each entry's candidate and the pinned baseline in this run,
exit 1 on a regression beyond the threshold (2: an entry could not be checked).
``kernelfarm ci recheck CONFIG``: re-measure pinned configs, re-tune where the driver, CUDA, NVRTC
or Triton version changed, exit 1 when an entry's best changed.
Both write a markdown summary and JUnit XML when asked (UTF-8, whatever the locale).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from pathlib import Path

import typer
from pydantic import ValidationError
from rich.console import Console

from kernelfarm.client import ApiError
from kernelfarm.commands.jobs import fail, finite_seconds
from kernelfarm.context import CliError, cli_context
from kernelfarm.core.files import write_text_atomically
from kernelfarm.core.printable import one_line
from kernelfarm.core.settings import settings_problem
from kernelfarm.gate.config import ConfigError, GateConfig, load_config
from kernelfarm.gate.measure import run_id_problem
from kernelfarm.gate.report import junit, markdown
from kernelfarm.gate.verdicts import Verdict, run_gate, run_recheck
from kernelfarm.sdk.client import Client

console = Console(emoji=False)
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
    _check_poll(poll)
    _check_run_id(run_id)
    _run("kernelfarm ci gate", config, run_id, summary, junit_xml, lambda c, cfg, rid: run_gate(c, cfg, rid, poll))


@ci_app.command()
def recheck(
    config: Path, run_id: str = RunId, summary: Path = Summary, junit_xml: Path = Junit, poll: float = Poll,
    force: bool = typer.Option(False, help="re-tune even where the toolchain did not change"),
) -> None:  # fmt: skip
    """Re-measure pinned configs; where the toolchain changed, re-tune and fail (exit 1) when a best changed."""
    _check_poll(poll)
    _check_run_id(run_id)
    _run("kernelfarm ci recheck", config, run_id, summary, junit_xml,
         lambda c, cfg, rid: run_recheck(c, cfg, rid, force=force, poll=poll))  # fmt: skip


Check = Callable[[Client, GateConfig, str], list[Verdict]]


def _check_poll(poll: float) -> None:
    """A usage error for a --poll that time.sleep refuses (NaN, negative: a traceback after the jobs
    were submitted) or that would read every job's status without a pause (0)."""
    finite_seconds(poll, "--poll")
    if poll == 0:
        raise typer.BadParameter("0 would read the jobs' status without a pause: give more than 0", param_hint="--poll")


def _check_run_id(run_id: str | None) -> None:
    """A usage error for a run id no Idempotency-Key can carry: each entry was an error row after the
    client's retries, worded as "cannot reach the farm" (a line break) or "not valid Unicode" (non-ASCII),
    or the farm refused every job (a space, too long)."""
    problem = run_id_problem(run_id) if run_id else None
    if problem:
        raise typer.BadParameter(problem, param_hint="--run-id / GITHUB_RUN_ID")


def _check_reports(config_path: Path, config: GateConfig, summary: Path | None, junit_xml: Path | None) -> None:
    """Exit 2 where a report would overwrite the other report or an input: ``--junit gate.toml``
    replaced the config with XML after the run, and one file for both reports kept only the XML."""
    inputs = {"the config": config_path, "the baseline export": config.baseline}
    if config.candidate is not None:
        inputs["the candidate export"] = config.candidate
    reports = [(option, path) for option, path in (("--summary", summary), ("--junit", junit_xml)) if path is not None]
    if len(reports) == 2 and _same_file(reports[0][1], reports[1][1]):
        fail(f"--summary and --junit name the same file {reports[0][1]}: give each report its own", 2)
    for option, path in reports:
        for what, source in inputs.items():
            if _same_file(path, source):
                fail(f"{option} {path} is {what}: the report would overwrite it", 2)


def _same_file(a: Path, b: Path) -> bool:
    try:
        return a.resolve() == b.resolve() or (a.exists() and b.exists() and a.samefile(b))
    except (OSError, RuntimeError, ValueError):  # unreadable, a link loop, a NUL: reading or writing says why
        return False


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
    _check_reports(config_path, config, summary, junit_xml)
    run_id = run_id or uuid.uuid4().hex
    try:
        client = cli_context().sdk_client()
    except ValidationError as exc:  # a wrong setting: pydantic's text is many lines, and quotes a URL's password
        if exc.title != "Settings":
            raise
        fail(one_line(f"cannot use the farm: invalid setting: {settings_problem(exc)}"), 2)
    except (CliError, ValueError) as exc:  # no farm named; a URL or token the client refuses (was a traceback)
        fail(one_line(f"cannot use the farm: {exc}"), 2)  # 2, not the CLI's usual 1: 1 means "regression"
    try:
        verdicts = check(client, config, run_id)
    except ConfigError as exc:
        fail(str(exc), 2)
    except UnicodeDecodeError:  # an export the config names
        fail(f"an export {config_path} names (baseline, candidate) is not UTF-8 text", 2)
    except RecursionError:
        fail(f"an export {config_path} names (baseline, candidate) is nested too deeply", 2)
    except ApiError as exc:
        fail(one_line(exc.message), 2)  # a server's detail may hold line breaks
    text = markdown(title, verdicts, run_id)
    console.print(_encodable(text, console.encoding), markup=False, highlight=False)
    # The verdicts are printed before any report is written, so an unwritable report loses none of them.
    reports = [(summary, text), (junit_xml, junit(title.replace(" ", "-"), verdicts))]
    unwritten = [problem for path, report in reports if path is not None and (problem := _write_report(path, report))]
    if unwritten:  # exit 2 even after a regression: the pipeline asked for a report it will not find
        fail("; ".join(unwritten), 2)
    if any(v.status == "error" for v in verdicts):
        raise typer.Exit(2)
    if any(v.status != "pass" for v in verdicts):
        raise typer.Exit(1)


def _write_report(path: Path, report: str) -> str | None:
    """Write ``report`` to ``path`` as UTF-8 (the JUnit XML says so; the locale's encoding may not be
    UTF-8, nor hold the status icons); None, or why it could not be written, on one line.

    A file is replaced atomically (core/files.py): a full disk or a cancelled pipeline leaves the previous
    report or none, never half a JUnit file the CI's parser then rejects. What is not a file (``/dev/stdout``,
    a pipe) is written through, as before."""
    try:
        if path.exists() and not path.is_file():
            path.write_text(report, encoding="utf-8")
        else:
            write_text_atomically(path, report)
    except OSError as exc:  # a missing folder, a directory, no permission
        return one_line(f"cannot write the report {path}: {exc.strerror or exc}")
    except ValueError as exc:  # a name no OS call can take
        return one_line(f"cannot write the report {path}: {exc}")
    return None


def _encodable(text: str, encoding: str) -> str:
    """``text`` with what ``encoding`` (standard output's, from the locale) cannot hold as Python escapes:
    printing the status icons to an ASCII stdout raised UnicodeEncodeError."""
    try:
        return text.encode(encoding, "backslashreplace").decode(encoding)
    except LookupError:  # an encoding Python does not know: the console writes what it can
        return text
