"""``kernelfarm kernel ...``: bring your own kernel. Upload a manifest with its files, list the
kernels, show one, list an uploaded kernel's versions. (``kernelfarm kernels`` is the catalogue table.)

``kernel add PATH`` reads the manifest (TOML or JSON) and uploads it with every file it names, found
next to it: ``source.files``, ``reference.source``/``reference.python`` and ``recording.file``.
"""

from __future__ import annotations

import json
import tomllib
from pathlib import Path
from typing import Any

import typer
from rich.console import Console
from rich.table import Table

from kernelfarm.commands.jobs import call
from kernelfarm.context import cli_context

console = Console()
kernel_app = typer.Typer(help="Bring your own kernel: upload CUDA kernel manifests, list and show kernels.",
                         no_args_is_help=True)  # fmt: skip


def named_files(manifest: dict[str, Any]) -> list[str]:
    """Every file a manifest names, in upload order."""
    names = list(manifest.get("source", {}).get("files", []))
    reference = manifest.get("reference", {})
    names += [reference[key] for key in ("source", "python") if isinstance(reference.get(key), str)]
    recording = manifest.get("recording", {})
    if isinstance(recording, dict) and isinstance(recording.get("file"), str):
        names.append(recording["file"])
    return [name for name in names if isinstance(name, str)]


def read_manifest(path: Path) -> tuple[bytes, dict[str, Any]]:
    raw = path.read_bytes()
    try:
        data = tomllib.loads(raw.decode()) if path.suffix == ".toml" else json.loads(raw)
    except (UnicodeDecodeError, tomllib.TOMLDecodeError, json.JSONDecodeError) as exc:
        console.print(
            f"[red]error[/]: {path} is not a valid {'TOML' if path.suffix == '.toml' else 'JSON'} manifest: {exc}"
        )
        raise typer.Exit(1) from None
    if not isinstance(data, dict):
        console.print(f"[red]error[/]: {path} is not a manifest (an object)")
        raise typer.Exit(1)
    return raw, data


@kernel_app.command("add")
def add(path: Path = typer.Argument(..., help="the manifest (.toml or .json); its files sit next to it")) -> None:
    """Upload a kernel manifest and its files; prints the version that holds them."""
    if not path.is_file():
        console.print(f"[red]error[/]: no manifest at {path}")
        raise typer.Exit(1)
    raw, data = read_manifest(path)
    files: list[tuple[str, bytes]] = []
    for name in named_files(data):
        candidate = path.parent / name
        if not candidate.is_file():
            console.print(f"[red]error[/]: the manifest names {name!r}, which is not next to it ({candidate})")
            raise typer.Exit(1)
        files.append((name, candidate.read_bytes()))
    stored = call(cli_context().client().upload_kernel, (path.name, raw), files)
    what = "uploaded as" if stored["created"] else "already stored as"
    console.print(f"{stored['name']} {what} version {stored['version']} (content {stored['content_hash'][:16]})")


@kernel_app.command("list")
def list_() -> None:
    """Every kernel: the catalogue, plugins and the latest version of each uploaded one."""
    rows = call(cli_context().client().kernels)
    table = Table("kernel", "version", "origin", "backends", "valid configs", "requires")
    for k in rows:
        table.add_row(k["name"], str(k["version"]), k.get("origin", "catalogue"), ",".join(k["backends"]),
                      str(k["valid_configs_default_problem"]), ",".join(k.get("requires", [])))  # fmt: skip
    console.print(table)


@kernel_app.command("show")
def show(
    name: str = typer.Argument(..., help="kernel name"),
    version: int = typer.Option(None, help="an uploaded kernel's version (default: its latest)"),
) -> None:
    """A kernel's parameters, restrictions, problem signature and where it runs."""
    kernel = call(cli_context().client().kernel, name, version)
    console.print(f"[bold]{kernel['name']}[/] version {kernel['version']} ({kernel.get('origin', 'catalogue')}), "
                  f"source {kernel['source_hash']}")  # fmt: skip
    console.print(kernel["description"])
    table = Table("tune parameter", "values")
    for param, values in kernel["parameters"].items():
        table.add_row(param, ", ".join(str(v) for v in values))
    console.print(table)
    for restriction in kernel["constraints"]:
        console.print(f"  restriction: {restriction}")
    console.print(
        f"default problem {kernel['default_problem']}: {kernel['valid_configs_default_problem']} valid configs"
    )
    if kernel.get("recorded_gpu_models"):
        console.print(f"recorded on: {', '.join(kernel['recorded_gpu_models'])}")
    if kernel.get("requires"):
        console.print(f"requires workers with: {', '.join(kernel['requires'])}")


@kernel_app.command("versions")
def versions(name: str = typer.Argument(..., help="an uploaded kernel's name")) -> None:
    """The uploaded versions of a kernel, oldest first."""
    rows = call(cli_context().client().kernel_versions, name)
    table = Table("version", "content hash", "source hash", "owner", "uploaded", "files", "recording")
    for row in rows:
        table.add_row(str(row["version"]), row["content_hash"][:16], row["source_hash"], row["owner"],
                      str(row["created_at"])[:19], ", ".join(row["files"]), row.get("recording") or "")  # fmt: skip
    console.print(table)
