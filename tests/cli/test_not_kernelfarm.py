"""KERNELFARM_API_URL pointing at a server that is not kernelfarm: the CLI says so in one line
("did not answer as a kernelfarm API (HTTP status, content type)"), not JSONDecodeError (a web
page) or TypeError (another JSON API's answer, indexed as a page of jobs)."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from kernelfarm.services import free_port, port_open, wait_for
from tests.cli.test_bad_arguments import kernelfarm
from tests.stand_in_server import stand_in_server


def _serve(argv: list[str], cwd: Path) -> Iterator[str]:
    port = free_port()
    server = subprocess.Popen([*argv, str(port)], cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_for(lambda: port_open("127.0.0.1", port), 20, "the test's HTTP server")
        yield f"http://127.0.0.1:{port}"
    finally:
        server.terminate()
        server.wait(timeout=10)


@pytest.fixture(scope="module")
def web_page_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """Python's file server: 404 with an HTML page for every path of the API."""
    yield from _serve([sys.executable, "-m", "http.server", "--bind", "127.0.0.1"], tmp_path_factory.mktemp("www"))


@pytest.fixture
def other_json_server() -> Iterator[str]:
    """Every request answered 200 with a JSON object that is no kernelfarm answer."""
    with stand_in_server(lambda request: (200, {"hello": "world"})) as url:
        yield url


COMMANDS = [
    ["kernels"],
    ["kernel", "list"],
    ["kernel", "show", "convolution_kernel"],
    ["jobs"],
    ["jobs", "--json"],
    ["workers"],
    ["best", "convolution_kernel", "--gpu", "g"],
    ["job", "0000"],
    ["export", "convolution_kernel"],
    ["export", "convolution_kernel", "-f", "triton"],
    ["export", "convolution_kernel", "-f", "header"],
    ["export", "-f", "csv", "--job", "00000000-0000-0000-0000-000000000000"],
]


def _says_not_kernelfarm(tmp_path: Path, url: str, args: list[str], status: str) -> None:
    done = kernelfarm(tmp_path, *args, env={"KERNELFARM_API_URL": url})
    assert done.returncode == 1 and done.stdout == "", (args, done.stdout, done.stderr)
    says = f"error: the server at {url} did not answer as a kernelfarm API ({status})\n"
    assert done.stderr == says, (args, done.stderr)


@pytest.mark.parametrize("args", COMMANDS, ids=" ".join)
def test_a_web_page_is_not_a_kernelfarm_answer(tmp_path: Path, web_page_server: str, args: list[str]) -> None:
    _says_not_kernelfarm(tmp_path, web_page_server, args, "HTTP 404, text/html")


def test_another_json_api_is_not_a_kernelfarm_answer(tmp_path: Path, other_json_server: str) -> None:
    for args in (["kernels"], ["kernel", "list"], ["jobs"], ["workers"], ["export", "k", "-f", "triton"]):
        _says_not_kernelfarm(tmp_path, other_json_server, args, "HTTP 200, application/json")
