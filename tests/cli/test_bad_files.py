"""A manifest (`kernel add`) or a gate config (`ci gate`) the CLI cannot use is one human line, not a
traceback: a field of the wrong type (AttributeError), nesting deeper than the parsers recurse
(RecursionError), bytes that are not UTF-8 (UnicodeDecodeError), a suffix read as the wrong format.

Each runs the installed CLI against an API address nobody listens on (tests/cli/test_bad_arguments.py):
the file is refused before anything is sent, and a manifest that was sent says "cannot reach the API"."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.cli.test_bad_arguments import kernelfarm

USER_KERNEL = Path(__file__).resolve().parents[1] / "data" / "user_kernel"
SOURCE = '[source]\nfiles = ["axpb.cu", "axpb_common.h"]\nentry = { name = "axpb" }\n'
REFERENCE_START = "[reference]\n"


@pytest.fixture
def kernel_folder(tmp_path: Path) -> Path:
    folder = tmp_path / "kernel"
    shutil.copytree(USER_KERNEL, folder)
    assert SOURCE in (folder / "axpb.toml").read_text()  # the edits below depend on it
    return folder


def _manifest(folder: Path, name: str, text: str) -> Path:
    path = folder / name
    path.write_text(text)
    return path


def _add(tmp_path: Path, manifest: Path) -> tuple[int, str]:
    done = kernelfarm(tmp_path, "kernel", "add", str(manifest))
    assert "Traceback" not in done.stdout + done.stderr, done.stderr
    assert done.stdout == "", done.stdout  # errors go to stderr
    return done.returncode, done.stderr


def test_a_field_of_the_wrong_type_is_named_with_the_type_expected(tmp_path: Path, kernel_folder: Path) -> None:
    text = (kernel_folder / "axpb.toml").read_text()
    top, _, rest = text.partition(SOURCE)
    before_reference = (top + rest).split(REFERENCE_START)[0]
    cases = {
        # source = "axpb.cu" at the top: AttributeError ('str' object has no attribute 'get')
        "source.toml": (f'source = "axpb.cu"\n{top}{rest}',
                        "error: manifest.source: expected a table ([source] in TOML, an object in JSON), got a string"),
        "reference.toml": (f'reference = "x.cu"\n{before_reference}',
                           "error: manifest.reference: expected a table ([reference] in TOML, an object in JSON), "
                           "got a string"),
        # files = "axpb.cu": "the manifest names 'a', which is not next to it"
        "files.toml": (text.replace('files = ["axpb.cu", "axpb_common.h"]', 'files = "axpb.cu"'),
                       'error: manifest.source.files: expected an array of file names (files = ["kernel.cu"]), '
                       "got a string"),
        "recording.json": ('{"name": "x", "recording": 5}',
                           "error: manifest.recording: expected a table ([recording] in TOML, an object in JSON), "
                           "got a number"),
    }  # fmt: skip
    for name, (manifest, says) in cases.items():
        code, stderr = _add(tmp_path, _manifest(kernel_folder, name, manifest))
        assert code == 1 and stderr == says + "\n", (name, stderr)


def test_a_manifest_nested_deeper_than_the_parsers_recurse(tmp_path: Path, kernel_folder: Path) -> None:
    for name, text in {"deep.json": "[" * 30000 + "]" * 30000, "deep.toml": "a = " + "[" * 30000 + "]" * 30000}.items():
        code, stderr = _add(tmp_path, _manifest(kernel_folder, name, text))
        kind = "JSON" if name.endswith("json") else "TOML"
        assert (
            code == 1 and stderr == f"error: {kernel_folder / name} is not a valid {kind} manifest: nested too deeply\n"
        )


def test_the_format_is_the_suffix_in_any_case_and_another_suffix_is_refused(
    tmp_path: Path, kernel_folder: Path
) -> None:
    text = (kernel_folder / "axpb.toml").read_text()
    code, stderr = _add(tmp_path, _manifest(kernel_folder, "Axpb.TOML", text))
    assert code == 1 and "not a valid JSON manifest" not in stderr
    assert stderr.startswith("error: cannot reach the API at http://127.0.0.1:"), stderr  # read, then sent
    code, stderr = _add(tmp_path, _manifest(kernel_folder, "axpb.txt", text))
    assert code == 1
    assert (
        stderr
        == f"error: {kernel_folder}/axpb.txt: a manifest is TOML (a .toml file) or JSON (a .json file), not '.txt'\n"
    )
    (kernel_folder / "latin1.toml").write_bytes(b"name = '\xff'\n")
    code, stderr = _add(tmp_path, kernel_folder / "latin1.toml")
    assert code == 1 and stderr == f"error: {kernel_folder}/latin1.toml is not a valid TOML manifest: not UTF-8 text\n"


def test_a_manifest_naming_a_folder_is_one_line(tmp_path: Path, kernel_folder: Path) -> None:
    (kernel_folder / "sub.cu").mkdir()
    text = (kernel_folder / "axpb.toml").read_text().replace('"axpb.cu", "axpb_common.h"', '"sub.cu"')
    code, stderr = _add(tmp_path, _manifest(kernel_folder, "folder.toml", text))
    assert code == 1 and stderr.startswith("error: the manifest names 'sub.cu', which is not a readable file"), stderr


@pytest.mark.parametrize(
    ("name", "content", "says"),
    [
        ("deep.json", "[" * 30000 + "]" * 30000, "is not valid JSON: nested too deeply"),
        ("deep.toml", "a = " + "[" * 30000 + "]" * 30000, "is not valid TOML: nested too deeply"),
        ("latin1.toml", b"baseline = '\xff'\n", "is not valid TOML: not UTF-8 text"),
    ],
)
def test_a_gate_config_the_parsers_cannot_read_is_one_line(
    tmp_path: Path, name: str, content: str | bytes, says: str
) -> None:
    config = tmp_path / name
    config.write_bytes(content if isinstance(content, bytes) else content.encode())
    done = kernelfarm(tmp_path, "ci", "gate", str(config))
    assert done.returncode == 2 and "Traceback" not in done.stdout + done.stderr, done.stderr
    assert done.stderr == f"error: {config} {says}\n"


def test_a_manifest_naming_a_file_outside_its_folder_is_refused_before_reading_it(
    tmp_path: Path, kernel_folder: Path
) -> None:
    """A manifest is data someone else may have written: before, `kernel add` read and sent any file it
    named ("/home/you/.ssh/id_rsa", "../x") or that a link in the folder pointed at (here it said
    "cannot reach the API": it had read the file and sent it)."""
    secret = tmp_path / "secret.h"
    secret.write_text("-----BEGIN OPENSSH PRIVATE KEY-----\n")
    (kernel_folder / "linked.h").symlink_to(secret)
    (kernel_folder / "inside.h").symlink_to(kernel_folder / "axpb_common.h")  # a link within the folder is fine
    text = (kernel_folder / "axpb.toml").read_text()
    not_a_name = "which is not a file name (a folder or an absolute path is in it)"
    for index, (name, says) in enumerate([
        (str(secret), not_a_name),
        ("../secret.h", not_a_name),
        ("..", not_a_name),
        ("linked.h", "which is a link to a file outside the manifest's folder (copy the file there)"),
    ]):  # fmt: skip
        manifest = text.replace('"axpb.cu", "axpb_common.h"', f'"axpb.cu", {json.dumps(name)}')
        code, stderr = _add(tmp_path, _manifest(kernel_folder, f"outside{index}.toml", manifest))
        assert (
            code == 1 and stderr == f"error: the manifest names {name!r}, {says}; it reads only files next to it\n"
        ), stderr
    manifest = text.replace('"axpb.cu", "axpb_common.h"', '"axpb.cu", "inside.h"')
    code, stderr = _add(tmp_path, _manifest(kernel_folder, "inside.toml", manifest))
    assert code == 1 and "cannot reach the API" in stderr, stderr
