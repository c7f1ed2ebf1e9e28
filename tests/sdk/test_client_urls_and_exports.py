"""The SDK client (kernelfarm.Client) on what an outside probe handed it: a base URL whose port is no
number raised httpx.InvalidURL from the constructor (documented: ValueError; `ci gate` printed a traceback
and exited 1, not 2), a token with a non-ASCII character is refused as one with a line break is, and a json
export of the wrong fields is one line, not pydantic's dump over many lines ("7 validation errors for
BestExport ... https://errors.pydantic.dev/...")."""

from __future__ import annotations

import pytest

from kernelfarm.sdk import Client
from tests.sdk.hostile_server import refusal


@pytest.mark.parametrize(
    ("base_url", "message"),
    [
        ("http://127.0.0.1:8765a", "base_url 'http://127.0.0.1:8765a' is not a valid URL: Invalid port: '8765a'"),
        ("http://[::1", "base_url 'http://[::1' is not a valid URL: "),
    ],
)
def test_a_base_url_httpx_cannot_parse_is_a_value_error(base_url: str, message: str) -> None:
    with pytest.raises(ValueError) as refused:
        Client(base_url, "kf_test")
    assert str(refused.value).startswith(message)


def test_a_token_with_a_non_ascii_character_is_refused() -> None:
    with pytest.raises(ValueError, match="token must be printable ASCII text"):
        Client("http://farm.test", "kf_abc\u2019")


def test_a_json_export_of_the_wrong_fields_is_one_line() -> None:
    refused = refusal(lambda request: (200, {"schema": "kernelfarm.best-export", "entries": 5}),
                      lambda client: client.export("convolution_kernel"))  # fmt: skip
    assert refused.status == 200
    assert refused.message.startswith("the farm's export is not readable: "), refused.message
    assert "\n" not in refused.message and "pydantic.dev" not in refused.message
    assert "kernel: field required; kernel_version: field required; " in refused.message


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ([1, "two"], "1; two"),  # AttributeError: 'list' object has no attribute 'get'
        ({"detail": [{"msg": "x", "loc": 5}]}, "5: x"),  # TypeError: 'int' object is not iterable
        ({"detail": None}, "no reason given"),
    ],
)
def test_an_error_answer_of_any_json_is_an_api_error(body: object, message: str) -> None:
    refused = refusal(lambda request: (404, body), lambda client: client.job("job-1"))
    assert refused.status == 404 and refused.message == message
