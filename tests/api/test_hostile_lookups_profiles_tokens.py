"""What an outside probe of the API found answered with a 500, a silent misreading or a reason that
did not say what was wrong, over HTTP to a real API process: best-config lookups and exports with odd
problem values, model profiles nested too deeply to read back, token ids and names, bodies that are
not JSON or nested too deeply, search-space values of the wrong type, and a pinned version that is
not the installed one."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from tests.api.conftest import client_for
from tests.api.test_input_hardening import JOB, exchange
from tests.conftest import Farm, make_token

LOOKUP = "kernel=convolution_kernel&gpu=nvidia-geforce-rtx-3090"


@pytest.mark.parametrize(
    ("query", "reason"),
    [
        (f"/v1/best?{LOOKUP}&problem=size_x%3D%C2%B2", "must be an integer"),  # "²": isdigit() but not int()
        (f"/v1/best?{LOOKUP}&problem=size_x%3D" + "9" * 5000, "5000 digits"),
        (f"/v1/best?{LOOKUP}&objective=energy&problem=size_x%3D" + "9" * 5000, "5000 digits"),
        (f"/v1/best?{LOOKUP}&problem=size_x%3D4096&problem=size_x%3D2048", "given twice"),
        ("/v1/best/export?kernel=convolution_kernel&problem=size_x%3D%C2%B2", "must be an integer"),
        ("/v1/best/export?kernel=convolution_kernel&problem=size_x%3D" + "9" * 5000, "5000 digits"),
        # A filter value no problem can have is named, as /v1/best names it, not "nothing matches".
        ("/v1/best/export?kernel=convolution_kernel&problem=size_x%3Dabc", "must be an integer"),
        ("/v1/best/export?kernel=convolution_kernel&problem=size_x%3D-1", "outside"),
    ],
)  # fmt: skip
def test_odd_problem_values_in_lookups_are_422_with_the_reason(
    api_only: Farm, submit_token: str, query: str, reason: str
) -> None:
    (status, _, payload), (after, _, _) = exchange(
        api_only, submit_token, [("GET", query, None), ("GET", "/health", None)]
    )
    assert status == 422, (status, payload[:300])
    assert reason in json.loads(payload)["detail"]
    assert after == 200  # the kept-alive connection still answers (it was reset after the 500)


def test_a_nul_in_a_kernel_name_is_404_on_its_versions(api_only: Farm, submit_token: str) -> None:
    (status, _, payload), (after, _, _) = exchange(
        api_only, submit_token, [("GET", "/v1/kernels/a%00b/versions", None), ("GET", "/health", None)]
    )
    assert status == 404 and json.loads(payload)["detail"], (status, payload[:300])
    assert after == 200


PROFILE: dict[str, Any] = {"model": "m", "device_name": "cpu", "dtype": "float32", "batch": 1, "seq": 8,
                           "latency_ms": 1.0, "report": {"operators": []}}  # fmt: skip


def nested(depth: int) -> dict[str, Any]:
    value: dict[str, Any] = {"leaf": 1}
    for _ in range(depth - 1):
        value = {"a": value}
    return value


def test_a_model_profile_that_could_not_be_read_back_is_refused(api_only: Farm, submit_token: str) -> None:
    """300 levels were stored (201), and every GET of it was a 500: pydantic does not serialize that deep."""
    with client_for(api_only, submit_token) as client:
        deep = client.post("/v1/profiles", json={**PROFILE, "report": nested(300)})
        assert deep.status_code == 422 and "nested deeper than 64 levels" in deep.text, deep.text
        kept = client.post("/v1/profiles", json={**PROFILE, "report": nested(60)})
        assert kept.status_code == 201, kept.text
        assert client.get(f"/v1/profiles/{kept.json()['id']}").status_code == 200


@pytest.mark.parametrize("latency", ["3", True])
def test_a_model_profiles_latency_is_a_number(api_only: Farm, submit_token: str, latency: Any) -> None:
    with client_for(api_only, submit_token) as client:
        answer = client.post("/v1/profiles", json={**PROFILE, "latency_ms": latency})
    assert answer.status_code == 422 and "latency_ms" in answer.text, answer.text


@pytest.fixture(scope="module")
def admin(api_only: Farm, database_url: str) -> httpx.Client:
    return client_for(api_only, make_token(database_url, "admin", name="hostile-admin"))


def test_the_api_creates_tokens_of_every_scope_the_cli_does(admin: httpx.Client) -> None:
    created = admin.post("/v1/tokens", json={"name": "uploader-by-api", "scopes": ["kernels"]})
    assert created.status_code == 201 and created.json()["scopes"] == ["kernels"], created.text


@pytest.mark.parametrize(
    "name",
    ["alice\u200b", "evil\u202egnp", "a\x7fb", "a\x85b", "   ", " alice", "alice\u2028"],
    ids=["zero-width space", "right-to-left override", "DEL", "NEL", "blank", "leading space", "line separator"],
)
def test_a_token_name_that_prints_like_another_or_not_at_all_is_refused(admin: httpx.Client, name: str) -> None:
    """Jobs are owned by token names: "alice" followed by a zero-width space passed for alice in job lists."""
    answer = admin.post("/v1/tokens", json={"name": name, "scopes": ["submit"]})
    assert answer.status_code == 422 and "token name" in answer.text, answer.text


# Letters and marks that print as nothing (Hangul fillers, the combining grapheme joiner, Khmer inherent
# vowels: default-ignorable, but not control or format characters), a blank braille cell, a no-break space.
LOOKALIKES = ["\u3164", "\u115f", "\u1160", "\uffa0", "\u034f", "\u17b4", "\u17b5", "\u2800", "\u00a0bob"]


@pytest.mark.parametrize("suffix", LOOKALIKES, ids=lambda s: f"U+{ord(s[0]):04X}")
def test_a_token_name_with_a_default_ignorable_or_blank_character_is_refused(admin: httpx.Client, suffix: str) -> None:
    """An outside probe got a 201 for "alice" followed by a Hangul filler: it prints as "alice"."""
    answer = admin.post("/v1/tokens", json={"name": f"alice{suffix}", "scopes": ["submit"]})
    assert answer.status_code == 422 and f"U+{ord(suffix[0]):04X}" in answer.text, answer.text


@pytest.mark.parametrize("spelling", ["{id}.0", "+{id}", "{id}_0", "%20{id}", "0{id}"])
def test_a_token_id_is_decimal_digits_only(admin: httpx.Client, spelling: str) -> None:
    """int() reads "7.0", "+7", "7_0" and " 7" as ids: "DELETE /v1/tokens/1.0" revoked token 1."""
    victim = admin.post("/v1/tokens", json={"name": "not-to-revoke", "scopes": ["read"]}).json()
    answer = admin.delete(f"/v1/tokens/{spelling.format(id=victim['id'])}")
    assert answer.status_code == 422 and "decimal digits" in answer.text, answer.text
    listed = {t["id"]: t for t in admin.get("/v1/tokens").json()}
    assert listed[victim["id"]]["revoked_at"] is None


def test_a_token_id_beyond_the_column_is_404(admin: httpx.Client) -> None:
    assert admin.delete(f"/v1/tokens/{2**31}").status_code == 404
    assert admin.delete(f"/v1/tokens/{10**18}").status_code == 404


def test_a_body_nested_too_deeply_says_so(api_only: Farm, submit_token: str) -> None:
    """It was a 400 "There was an error parsing the body"."""
    deep = b'{"a":' * 5000 + b"1" + b"}" * 5000
    (status, _, payload), (after, _, _) = exchange(
        api_only, submit_token, [("POST", "/v1/jobs", deep), ("GET", "/health", None)]
    )
    assert status == 422 and "nested deeper than it can be read" in payload.decode(), (status, payload[:300])
    assert after == 200


def test_a_huge_integer_is_refused_without_pythons_advice(api_only: Farm, submit_token: str) -> None:
    body = json.dumps(JOB).replace('"seed": 1', '"seed": ' + "9" * 5000).encode()
    (status, _, payload), _ = exchange(api_only, submit_token, [("POST", "/v1/jobs", body), ("GET", "/health", None)])
    text = payload.decode()
    assert status == 422 and "an integer of more than 4300 digits" in text and "set_int_max_str_digits" not in text


@pytest.mark.parametrize("content_type", ["text/plain", "application/x-www-form-urlencoded"])
def test_a_json_body_sent_as_another_type_is_415_saying_so(
    api_only: Farm, submit_token: str, content_type: str
) -> None:
    with client_for(api_only, submit_token) as client:
        answer = client.post("/v1/jobs", content=json.dumps(JOB), headers={"Content-Type": content_type})
    assert answer.status_code == 415 and "Content-Type: application/json" in answer.json()["detail"]


def test_a_login_form_is_told_to_send_json(api_only: Farm, submit_token: str) -> None:
    """The route's own check could never run: body validation answered "Field required" first."""
    with httpx.Client(base_url=api_only.api_url) as client:
        form = client.post("/ui/session", data={"token": submit_token})
        extra = client.post("/ui/session", json={"token": submit_token, "next": "/"})
        good = client.post("/ui/session", json={"token": submit_token})
    assert form.status_code == 422 and "send the token as JSON" in form.json()["detail"]
    assert extra.status_code == 422 and "nothing else" in extra.json()["detail"]
    assert good.status_code == 204 and "kf_session" in good.cookies


def test_a_space_value_of_another_type_is_named(api_only: Farm, submit_token: str) -> None:
    """16.0 == 16 let it through, and the space then held no config ("empty search space")."""
    with client_for(api_only, submit_token) as client:
        answer = client.post("/v1/jobs", json={**JOB, "space": {"parameters": {"block_size_x": [16.0]}}})
    assert answer.status_code == 422 and "values [16.0] are not in" in answer.text, answer.text


def test_a_catalogue_kernel_pinned_to_another_version_is_refused(api_only: Farm, submit_token: str) -> None:
    with client_for(api_only, submit_token) as client:
        answer = client.post("/v1/jobs", json={**JOB, "kernel_version": 5})
    assert answer.status_code == 422 and "is at version 1 here, not 5" in answer.text, answer.text


@pytest.mark.parametrize(
    ("field", "value"), [("model", "gpt2\u202e"), ("device_name", "NVIDIA\u200b H100"), ("model", "gpt2\u3164")]
)
def test_a_model_profiles_titles_hold_no_invisible_characters(
    api_only: Farm, submit_token: str, field: str, value: str
) -> None:
    """They title the profile's page: a right-to-left override showed the device name reversed."""
    with client_for(api_only, submit_token) as client:
        answer = client.post("/v1/profiles", json={**PROFILE, field: value})
    assert answer.status_code == 422 and "invisible or control character" in answer.text, answer.text
