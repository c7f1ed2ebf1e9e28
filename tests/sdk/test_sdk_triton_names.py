"""``Client.export(kernel, "triton")`` returns the server's ``{file name: text}``, which callers write as
``folder / name``: a name that is not a plain file name (``../x``, ``/x``, a NUL) is refused with an
ApiError naming it, as the CLI's client refuses it (docs/CLIENT.md). The real farm never sends such a
name (its writer refuses them), so the answers come from a hostile server
(tests/stand_in_server.py, tests/sdk/hostile_server.py)."""

from __future__ import annotations

from typing import Any

import pytest

from kernelfarm.sdk import Client
from tests.sdk.hostile_server import refusal
from tests.stand_in_server import stand_in_server

PLAIN = "matmul_fp32,device_name=NVIDIA_H100_80GB_HBM3.json"


def triton(client: Client) -> object:
    return client.export("matmul_fp32", "triton")


def triton_export(files: dict[str, Any]) -> Any:
    """A server whose triton export is ``{"files": files}``."""
    return lambda request: (200, {"files": files})


@pytest.mark.parametrize(
    "name",
    ["../escaped.json", "/etc/cron.d/x", "configs/nested.json", "..", ".", "", "a\\b.json", "nul\x00.json"],
    ids=["parent", "absolute", "separator", "dot-dot", "dot", "empty", "backslash", "nul"],
)
def test_a_triton_file_name_that_is_not_a_plain_file_name_is_refused(name: str) -> None:
    refused = refusal(triton_export({PLAIN: "{}", name: "{}"}), triton)
    assert refused.status == 200
    assert refused.message == f"the farm's triton export names files that are not plain file names: {name!r}"


def test_many_bad_names_are_one_short_line() -> None:
    names = {f"../{i}.json": "{}" for i in range(50)}
    refused = refusal(triton_export(names), triton)
    assert refused.message == (
        "the farm's triton export names files that are not plain file names: "
        "'../0.json', '../1.json', '../2.json', '../3.json', '../4.json' (and 45 more)"
    )


def test_a_triton_file_that_is_not_text_is_refused() -> None:
    refused = refusal(triton_export({PLAIN: {"BLOCK": 64}}), triton)
    assert refused.message == f"the farm's triton export has files whose content is not text: {PLAIN!r}"


def test_plain_file_names_are_returned() -> None:
    files = {PLAIN: '{"1": {"BLOCK": 64}}', "matmul_fp32,device_name=NVIDIA_A100.json": "{}"}
    with stand_in_server(triton_export(files)) as url, Client(url, retries=0) as client:
        assert client.export("matmul_fp32", "triton") == files
