"""``kernelfarm kernel ...``: bring your own kernel. Upload a manifest with its files, list the
kernels, show one, list an uploaded kernel's versions. (``kernelfarm kernels`` is the catalogue table.)

``kernel add PATH`` reads the manifest (``*.toml``: TOML, ``*.json``: JSON, the suffix in any case) and
uploads it with every file it names, found next to it: ``source.files``, ``reference.source``/
``reference.python`` and ``recording.file``.
"""

from __future__ import annotations

import json
import tomllib
from pathlib import Path
from typing import Any

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from kernelfarm.commands.jobs import call, cells, fail
from kernelfarm.context import cli_context
from kernelfarm.core.files import read_bounded, size_text
from kernelfarm.core.printable import one_line, terminal_text

console = Console(emoji=False)
kernel_app = typer.Typer(help="Bring your own kernel: upload CUDA kernel manifests, list and show kernels.",
                         no_args_is_help=True)  # fmt: skip


# A manifest's kind, by its suffix in any case (Manifest.TOML too).
FORMATS = {".toml": "TOML", ".json": "JSON"}


def _shown(value: Any) -> str:
    """A value the server sent (an upload's text) as printed: never read as rich markup, and with its
    control characters escaped (core/printable.terminal_text): a description holding escape sequences
    retitled and cleared the terminal of whoever ran `kernel show`."""
    return terminal_text(str(value))


def _cells(*values: Any) -> list[str]:
    """A table row of the server's values (see _shown)."""
    return cells(*map(_shown, values))


def _kind(value: Any) -> str:
    """What a manifest value is, in TOML's words."""
    if isinstance(value, str):
        return "a string"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, list):
        return "an array"
    return type(value).__name__


def _table(manifest: dict[str, Any], field: str) -> dict[str, Any]:
    """``manifest[field]``: a table when present (empty when absent: the server says what is missing)."""
    value = manifest.get(field, {})
    if not isinstance(value, dict):
        fail(f"manifest.{field}: expected a table ([{field}] in TOML, an object in JSON), got {_kind(value)}")
    return value


def named_files(manifest: dict[str, Any]) -> list[str]:
    """Every file a manifest names, in upload order. A table the file names sit in (``source``,
    ``reference``, ``recording``) or ``source.files`` of the wrong type is one line naming the field;
    anything else wrong is the server's to say (its validation names the field too)."""
    files = _table(manifest, "source").get("files", [])
    if not isinstance(files, list):
        fail(f'manifest.source.files: expected an array of file names (files = ["kernel.cu"]), got {_kind(files)}')
    reference = _table(manifest, "reference")
    names = [*files, *(reference.get(key) for key in ("source", "python"))]
    names.append(_table(manifest, "recording").get("file"))
    return [name for name in names if isinstance(name, str)]


def manifest_format(path: Path) -> str:
    """TOML or JSON, by the suffix in any case; another suffix is one line naming both."""
    kind = FORMATS.get(path.suffix.lower())
    if kind is None:
        suffix = repr(path.suffix) if path.suffix else "a name without a suffix"
        fail(f"{path}: a manifest is TOML (a .toml file) or JSON (a .json file), not {suffix}")
    return kind


def read_manifest(path: Path) -> tuple[bytes, dict[str, Any]]:
    """The manifest's bytes, as sent, and what they hold. Read up to the farm's own limit of a manifest
    (kernels/manifest/bundle.py): a 6 GB sparse .toml was read whole, and /dev/zero forever."""
    # Imported here: the bundle's checks pull in numpy, which no other kernel command needs at start.
    from kernelfarm.kernels.manifest.bundle import MAX_MANIFEST_BYTES

    kind = manifest_format(path)
    try:
        raw = read_bounded(path, MAX_MANIFEST_BYTES)
    except FileNotFoundError:
        fail(f"no manifest at {path}")
    except OSError as exc:  # not a regular file, too large, unreadable, a name too long
        fail(f"cannot read {path}: {exc.strerror}")
    except ValueError as exc:  # a name no OS call takes (a NUL)
        fail(f"cannot read {path}: {exc}")
    try:
        text = raw.decode("utf-8")
        data = tomllib.loads(text) if kind == "TOML" else json.loads(text)
    except UnicodeDecodeError:
        fail(f"{path} is not a valid {kind} manifest: not UTF-8 text")
    except RecursionError:
        fail(f"{path} is not a valid {kind} manifest: nested too deeply")
    except ValueError as exc:  # TOMLDecodeError, JSONDecodeError, an integer longer than Python converts
        fail(f"{path} is not a valid {kind} manifest: {exc}")
    if not isinstance(data, dict):
        fail(f"{path} is not a manifest: {kind} {_kind(data)}, not a table (an object)")
    return raw, data


def _outside_the_folder(folder: Path, name: str) -> str | None:
    """Why the file ``name`` is not one the manifest in ``folder`` may have uploaded (None: it is).

    A manifest is data someone else may have written (a kernel's repository): before, a name such as
    "/etc/passwd", "../../.ssh/id_rsa" or a link in the folder pointing out of it made ``kernel add``
    read that file and send it to the farm, where a header is compiled and NVRTC's log, shown to
    every reader, quotes what it includes. The server refuses such names, but only after they arrived."""
    if name in ("", ".", "..") or Path(name).name != name:
        return "which is not a file name (a folder or an absolute path is in it)"
    try:
        inside = (folder / name).resolve().is_relative_to(folder.resolve())
    except (OSError, RuntimeError, ValueError):  # a loop of links, a NUL: reading it reports that
        return None
    return None if inside else "which is a link to a file outside the manifest's folder (copy the file there)"


@kernel_app.command("add")
def add(path: Path = typer.Argument(..., help="the manifest (.toml or .json); its files sit next to it")) -> None:
    """Upload a kernel manifest and its files; prints the version that holds them."""
    from kernelfarm.kernels.manifest.bundle import MAX_RECORDING_BYTES, MAX_SOURCE_BYTES, MAX_TOTAL_BYTES

    raw, data = read_manifest(path)
    names = named_files(data)
    recording = _table(data, "recording").get("file")
    files: list[tuple[str, bytes]] = []
    total, most = 0, MAX_TOTAL_BYTES + MAX_RECORDING_BYTES  # the farm's limit of all files together
    for name in names:
        candidate = path.parent / name
        outside_reason = _outside_the_folder(path.parent, name)
        if outside_reason is not None:
            fail(f"the manifest names {name!r}, {outside_reason}; it reads only files next to it")
        # The farm's limits of each file (bundle._check_sizes): a FIFO named in the folder hung here.
        limit = MAX_RECORDING_BYTES if name == recording else MAX_SOURCE_BYTES
        try:
            content = read_bounded(candidate, limit)
        except OSError as exc:  # missing, a folder, a FIFO, too large, unreadable, a name the file system refuses
            # one_line: the name is the manifest's, and may hold an escape sequence (repr escapes it above)
            fail(one_line(f"the manifest names {name!r}, which is not a readable file next to it "
                          f"({candidate}: {exc.strerror})"))  # fmt: skip
        except ValueError:
            fail(f"the manifest names {name!r}, which no file can be called")
        # ... and of all of them together: a manifest naming thousands of files is not read whole either.
        total += len(content)
        if total > most:
            fail(f"the files the manifest names hold more than the farm's limit of {size_text(most)} in all")
        files.append((name, content))
    # The server reads *.toml as TOML, anything else as JSON: the name sent says which, in lower case.
    sent_name = path.stem + path.suffix.lower()
    stored = call(cli_context().client().upload_kernel, (sent_name, raw), files)
    what = "uploaded as" if stored["created"] else "already stored as"
    said = f"{stored['name']} {what} version {stored['version']} (content {stored['content_hash'][:16]})"
    console.print(_shown(said), markup=False, highlight=False)


@kernel_app.command("list")
def list_() -> None:
    """Every kernel: the catalogue, plugins and the latest version of each uploaded one."""
    rows = call(cli_context().client().kernels)
    table = Table("kernel", "version", "origin", "backends", "valid configs", "requires")
    for k in rows:
        table.add_row(*_cells(k["name"], k["version"], k.get("origin", "catalogue"), ",".join(k["backends"]),
                             k["valid_configs_default_problem"], ",".join(k.get("requires", []))))  # fmt: skip
    console.print(table)


@kernel_app.command("show")
def show(
    name: str = typer.Argument(..., help="kernel name"),
    version: int = typer.Option(None, help="an uploaded kernel's version (default: its latest)"),
) -> None:
    """A kernel's parameters, restrictions, problem signature and where it runs."""
    kernel = call(cli_context().client().kernel, name, version)
    # Every text below is the server's, from an uploaded manifest: printed as written, never as markup,
    # its control characters escaped (_shown).
    console.print(f"[bold]{escape(_shown(kernel['name']))}[/] version {escape(_shown(kernel['version']))} "
                  f"({escape(_shown(kernel.get('origin', 'catalogue')))}), "
                  f"source {escape(_shown(kernel['source_hash']))}")  # fmt: skip
    console.print(_shown(kernel["description"]), markup=False)
    table = Table("tune parameter", "values")
    for param, values in kernel["parameters"].items():
        table.add_row(*_cells(param, ", ".join(str(v) for v in values)))
    console.print(table)
    for restriction in kernel["constraints"]:
        console.print(_shown(f"  restriction: {restriction}"), markup=False)
    console.print(
        _shown(f"default problem {kernel['default_problem']}: {kernel['valid_configs_default_problem']} valid configs"),
        markup=False,
    )
    if kernel.get("recorded_gpu_models"):
        console.print(_shown(f"recorded on: {', '.join(kernel['recorded_gpu_models'])}"), markup=False)
    if kernel.get("requires"):
        console.print(_shown(f"requires workers with: {', '.join(kernel['requires'])}"), markup=False)


@kernel_app.command("versions")
def versions(name: str = typer.Argument(..., help="an uploaded kernel's name")) -> None:
    """The uploaded versions of a kernel, oldest first."""
    rows = call(cli_context().client().kernel_versions, name)
    table = Table("version", "content hash", "source hash", "owner", "uploaded", "files", "recording")
    for row in rows:
        uploaded = str(row["created_at"])[:19]
        table.add_row(*_cells(row["version"], row["content_hash"][:16], row["source_hash"], row["owner"], uploaded,
                              ", ".join(row["files"]), row.get("recording") or ""))  # fmt: skip
    console.print(table)
