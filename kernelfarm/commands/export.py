"""``kernelfarm export``: a kernel's best configs, or a job's trials, in the formats users' code reads
(docs/EXPORTS.md).

Written files replace their old version atomically (core/files.py), keeping its permissions: a write
that fails (a full disk) leaves the file that was there intact. A path that is not a regular file
(``/dev/stdout``, a FIFO) is written in place: it cannot be replaced.
"""

from __future__ import annotations

import contextlib
import os
import stat
import sys
from pathlib import Path

import typer
from rich.console import Console

from kernelfarm.client import Client
from kernelfarm.commands.jobs import call, fail, parse_pairs, require_text, resolve_job_id
from kernelfarm.context import cli_context
from kernelfarm.core.exports import BEST_FORMATS, TRIAL_FORMATS, json_format
from kernelfarm.core.files import write_text_atomically

console = Console(stderr=True, emoji=False)


def export(
    kernel: str = typer.Argument(
        None, help="kernel name (with --job: optional; when given, it must be the job's kernel)", show_default=False
    ),
    format: str = typer.Option("json", "--format", "-f", help="json, header, triton, kernel_tuner, t4 or csv"),
    gpu: list[str] = typer.Option([], help="only this GPU model (slug or device name; repeatable)"),
    problem: list[str] = typer.Option([], help="only problems with this name=value (repeatable)"),
    job: str = typer.Option(
        None, help="the job whose trials kernel_tuner, t4 and csv export (its id or a unique prefix of one)"
    ),
    out: Path = typer.Option(None, "--out", "-o", help="file to write (triton: folder); default: standard output"),
) -> None:
    """Export best configs (json, header, triton: every GPU model and problem recorded, or those
    filtered) or a job's trials (kernel_tuner, t4, csv: --job)."""
    if format not in BEST_FORMATS + TRIAL_FORMATS:
        raise typer.BadParameter(
            f"format must be one of {', '.join(BEST_FORMATS + TRIAL_FORMATS)}", param_hint="--format"
        )
    if kernel is not None:
        require_text(kernel, "KERNEL")
    for slug in gpu:
        require_text(slug, "--gpu")
    if format in TRIAL_FORMATS:
        if not job:
            raise typer.BadParameter(f"the {format} format exports a job's trials: give --job", param_hint="--job")
        if gpu or problem:
            raise typer.BadParameter(
                f"the {format} format exports every trial of the job: --gpu and --problem filter best configs "
                f"({', '.join(BEST_FORMATS)})",
                param_hint="--gpu/--problem",
            )
    else:
        if job:
            raise typer.BadParameter(
                f"the {format} format exports best configs, not a job's trials: --job goes with "
                f"{', '.join(TRIAL_FORMATS)}",
                param_hint="--job",
            )
        if kernel is None:
            raise typer.BadParameter(f"the {format} format exports one kernel's best configs", param_hint="KERNEL")
    filters = parse_pairs(problem, "--problem")
    _check_destination(out, folder=format == "triton")
    client = cli_context().client()
    written: str | dict[str, str]
    if format in TRIAL_FORMATS:
        written = call(client.export_trials, _job_of(client, job, kernel), format)
    else:
        written = call(client.export, kernel, format, gpu, filters)
        if format == "json":  # Client.export checked it: the farm's export schema, a version this CLI reads
            written = json_format.write(json_format.read(str(written)))
    if isinstance(written, dict):  # triton: a file per device
        # Client.export refused names that are not plain file names (../x, /x): each file lands in the folder.
        folder = out or Path(".")
        _make_folder(folder)
        for name, text in written.items():
            _write(folder / name, text)
            console.print(f"wrote {folder / name}", markup=False, highlight=False, soft_wrap=True)
    elif out is not None:
        _write(out, written)
        console.print(f"wrote {out}", markup=False, highlight=False, soft_wrap=True)
    else:
        _write_stdout(written)


def _job_of(client: Client, job: str, kernel: str | None) -> str:
    """The full id of ``job`` (an id or a unique prefix, as `kernelfarm job` takes), refused when
    ``kernel`` is given and the job tuned another kernel (its trials are not that kernel's)."""
    job_id = resolve_job_id(client, job)
    tuned = call(client.job, job_id)["kernel"]
    if kernel is not None and tuned != kernel:
        raise typer.BadParameter(
            f"job {job_id} tuned {tuned}, not {kernel}: `kernelfarm export {tuned} --job {job}` "
            f"(or leave the kernel out) exports its trials",
            param_hint="KERNEL",
        )
    return job_id


def _check_destination(out: Path | None, folder: bool) -> None:
    """Refuse, before anything is fetched, a destination that cannot take what is written: a file where
    the triton folder goes, a folder, a missing folder, a name the file system refuses (too long)."""
    if out is None:
        return
    try:
        _check_kind(out, folder)
    except OSError as exc:  # ENAMETOOLONG, EACCES on a folder above it: Path.is_dir raises rather than say False
        fail(f"cannot write {out}: {exc.strerror or exc}")


def _check_kind(out: Path, folder: bool) -> None:
    if folder:
        if out.exists() and not out.is_dir():
            fail(f"cannot write into {out}: it is a file (the triton format writes a file per device into a folder)")
        return
    if out.is_dir():
        fail(f"cannot write {out}: it is a folder (--out names the file to write)")
    if not out.parent.is_dir():
        fail(f"cannot write {out}: no folder {out.parent}")


def _make_folder(folder: Path) -> None:
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        fail(f"cannot make the folder {folder}: {exc.strerror}")


def _write(path: Path, text: str) -> None:
    """``text`` into ``path``, atomically where ``path`` is (or will be) a regular file."""
    try:
        if path.exists() and not stat.S_ISREG(path.stat().st_mode):  # /dev/stdout, a FIFO: write in place
            with path.open("w", encoding="utf-8") as handle:
                handle.write(text)
            return
        write_text_atomically(path, text)
    except OSError as exc:
        fail(f"cannot write {path}: {exc.strerror or exc}")


def _write_stdout(text: str) -> None:
    try:
        sys.stdout.write(text)
        sys.stdout.flush()
    except OSError as exc:  # a full disk (> /dev/full), a closed pipe
        # What is still buffered goes nowhere: Python would report it again at exit ("Exception ignored").
        with contextlib.suppress(OSError):
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        fail(f"cannot write to standard output: {exc.strerror or exc}")
