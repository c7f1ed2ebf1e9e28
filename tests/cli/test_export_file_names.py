"""``kernelfarm export --format triton --out DIR`` against a hostile server: a small HTTP server of the
test's own (tests/stand_in_server.py) stands in for one that answers the triton export with file names
that leave the folder
(``../x``, an absolute path, NUL). Our real server never sends such names (core/exports/triton.py
refuses a device name that gives one); the CLI must not trust that the server at its address is ours.
It refuses the answer in one line, exits 1 and writes nothing, not even the good file beside them."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.cli.test_bad_arguments import kernelfarm
from tests.stand_in_server import StandInRequest, stand_in_server

GOOD = "probe,device_name=NVIDIA_L4.json"


class TritonExportServer:
    """Answers every request with ``{"files": files}``, ``files`` as the test sets it."""

    def __init__(self) -> None:
        self.files: dict[str, str] = {}
        self.url = ""  # the stand-in server's, while it serves

    def __call__(self, request: StandInRequest) -> tuple[int, Any]:
        return 200, {"files": self.files}


@pytest.fixture
def server() -> Iterator[TritonExportServer]:
    stand_in = TritonExportServer()
    with stand_in_server(stand_in) as url:
        stand_in.url = url
        yield stand_in


def export_triton(tmp_path: Path, server: TritonExportServer, out: Path) -> tuple[int, str, str]:
    done = kernelfarm(tmp_path, "export", "probe", "-f", "triton", "--out", str(out),
                      env={"KERNELFARM_API_URL": server.url})  # fmt: skip
    return done.returncode, done.stdout, done.stderr


def files_under(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file())


@pytest.mark.parametrize(
    "name",
    ["../escaped.json", "ABSOLUTE", "sub/dir.json", "..", ".", "", "nul\x00.json", "back\\slash.json"],
    ids=["parent", "absolute", "separator", "dotdot", "dot", "empty", "nul", "backslash"],
)
def test_a_name_that_is_not_a_plain_file_name_is_refused_and_nothing_written(
    tmp_path: Path, server: TritonExportServer, name: str
) -> None:
    out = tmp_path / "work" / "out"
    absolute = tmp_path / "elsewhere" / "abs.json"
    absolute.parent.mkdir()
    name = str(absolute) if name == "ABSOLUTE" else name
    server.files = {GOOD: "{}\n", name: "{}\n"}
    code, stdout, stderr = export_triton(tmp_path, server, out)
    assert (code, stdout) == (1, ""), stderr
    assert stderr.startswith("error: the server at ") and stderr.count("\n") == 1, stderr
    assert "not plain file names" in stderr and repr(name) in stderr and "nothing was written" in stderr
    assert not out.exists()  # the folder is made only for an answer that is written
    assert files_under(tmp_path / "work") == [] and files_under(absolute.parent) == []


def test_plain_names_are_written_into_the_folder(tmp_path: Path, server: TritonExportServer) -> None:
    """The stand-in answers as the farm does: the CLI writes its files (the check above means something)."""
    server.files = {GOOD: '{"M=1": {"BS": 1}}\n', "...": "{}\n"}  # "..." is a plain (odd) file name
    code, _, stderr = export_triton(tmp_path, server, tmp_path / "out")
    assert code == 0, stderr
    assert files_under(tmp_path / "out") == ["...", GOOD]
    assert (tmp_path / "out" / GOOD).read_text() == '{"M=1": {"BS": 1}}\n'
