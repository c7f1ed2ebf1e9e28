"""The SDK client's errors are ApiError (docs/CLIENT.md), its arguments are checked when it is made, ids
never name another resource, and the runtime lookup tells an unknown kernel (the caller's typo: ApiError
404) from a kernel nothing was measured for yet (LookupMiss), against a real API process."""

from __future__ import annotations

import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from kernelfarm.client import ApiError
from kernelfarm.sdk import BestConfigLookup, Client, LookupMiss
from tests.conftest import Farm, make_token

H100 = "NVIDIA H100 80GB HBM3"


class Recorder:
    """A farm that records what reached it and answers every request 404."""

    def __init__(self) -> None:
        self.paths: list[str] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.paths.append(request.url.raw_path.decode())
        return httpx.Response(404, json={"detail": "not found"})


def offline(recorder: Recorder, **kwargs: Any) -> Client:
    return Client("http://farm.test", "kf_test", transport=httpx.MockTransport(recorder), **kwargs)


@pytest.mark.parametrize(
    ("problem", "reason"),
    [
        ({"size_x": math.nan}, "NaN or infinite"),
        ({"size_x": math.inf}, "NaN or infinite"),
        ({"size_x": "\ud800"}, "not valid Unicode"),
        ({"size_x": object()}, "not JSON serializable"),
    ],
    ids=["nan", "inf", "lone-surrogate", "object"],
)
def test_a_request_that_cannot_be_encoded_is_an_api_error_and_not_sent(problem: dict[str, Any], reason: str) -> None:
    recorder = Recorder()
    with pytest.raises(ApiError, match=reason) as refused:
        offline(recorder).submit("convolution_kernel", "nvidia-a100", problem, budget_trials=1)
    assert refused.value.status == 422 and "not sent" in str(refused.value.detail)
    with pytest.raises(ApiError, match="not valid Unicode"):
        offline(recorder).best("convolution_kernel\udcff", "nvidia-a100")
    with pytest.raises(ApiError, match="not valid Unicode"):
        offline(recorder).job("\udcff")
    assert recorder.paths == []


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"retries": -1}, "retries must be an integer >= 0"),
        ({"retries": 1.5}, "retries must be an integer >= 0"),
        ({"timeout": 0}, "timeout must be more than 0"),
        ({"timeout": -1.0}, "timeout must be a finite number"),
        ({"backoff": math.nan}, "backoff must be a finite number"),
        ({"base_url": "farm:8000"}, "base_url must be an http:// or https:// URL"),
        ({"token": "kf_\n"}, "token must be printable ASCII"),
    ],
)
def test_bad_arguments_are_refused_when_the_client_is_made(kwargs: dict[str, Any], message: str) -> None:
    arguments = {"base_url": "http://farm.test", "token": "kf_test"} | kwargs
    with pytest.raises(ValueError, match=message):
        Client(**arguments)
    Client("http://farm.test", retries=0, backoff=0).close()  # the edges are fine


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"poll": math.nan}, "poll must be a finite number of seconds > 0"),
        ({"poll": math.inf}, "poll must be a finite number"),
        ({"poll": -1}, "poll must be a finite number"),
        ({"poll": 0}, "poll must be more than 0"),
        ({"poll": "1"}, "poll must be a finite number"),
        ({"timeout": math.nan}, "timeout must be a finite number of seconds >= 0"),
        ({"timeout": -0.5}, "timeout must be a finite number"),
    ],
)
def test_bad_wait_and_follow_intervals_are_refused_before_the_farm_is_asked(
    kwargs: dict[str, Any], message: str
) -> None:
    recorder = Recorder()
    client = offline(recorder, retries=0)
    with pytest.raises(ValueError, match=message):
        client.wait("00000000-0000-0000-0000-000000000001", **kwargs)
    if "poll" in kwargs:
        with pytest.raises(ValueError, match=message):
            next(client.follow("00000000-0000-0000-0000-000000000001", poll=kwargs["poll"]))
    assert recorder.paths == []


def test_ids_are_one_quoted_path_segment() -> None:
    recorder = Recorder()
    client = offline(recorder, retries=0)
    for job_id in ("../kernels", "..", ".", "a/b?c#d", "%2e%2e"):
        with pytest.raises(ApiError):
            client.job(job_id)
        with pytest.raises(ApiError):
            client.cancel(job_id)
    assert recorder.paths == [
        "/v1/jobs/..%2Fkernels", "/v1/jobs/..%2Fkernels/cancel", "/v1/jobs/%2E%2E", "/v1/jobs/%2E%2E/cancel",
        "/v1/jobs/%2E", "/v1/jobs/%2E/cancel", "/v1/jobs/a%2Fb%3Fc%23d", "/v1/jobs/a%2Fb%3Fc%23d/cancel",
        "/v1/jobs/%252e%252e", "/v1/jobs/%252e%252e/cancel",
    ]  # fmt: skip
    with pytest.raises(ApiError, match="job '' not found"):
        client.job("")


def test_an_answer_that_is_not_what_was_asked_is_an_api_error() -> None:
    client = Client("http://farm.test", transport=httpx.MockTransport(lambda _: httpx.Response(200, json=[])))
    with pytest.raises(ApiError, match="is not a Job"):
        client.job("00000000-0000-0000-0000-000000000001")
    html = Client("http://farm.test", transport=httpx.MockTransport(lambda _: httpx.Response(200, text="<html>")))
    with pytest.raises(ApiError, match="not JSON"):
        html.kernels()


# ---------------------------------------------------------------- against the real API


@pytest.fixture(scope="module")
def api(database_url: str, redis_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Client]:
    farm = Farm(database_url, redis_url, tmp_path_factory.mktemp("sdk-api"))
    try:
        farm.start_api()
        with Client(farm.api_url, make_token(database_url, "read", name="sdk-errors"), retries=0) as client:
            yield client
    finally:
        farm.stop_all()


def test_a_path_like_job_id_is_refused_as_a_job_id(api: Client) -> None:
    # Unquoted, "../kernels" asked for /v1/kernels and the list of kernels failed to read as a Job.
    for job_id in ("../kernels", "..", "../../v1/kernels"):
        with pytest.raises(ApiError) as refused:
            api.job(job_id)
        assert refused.value.status in (404, 422), (job_id, refused.value)  # no such job / not a job id


def test_an_unknown_kernel_raises_but_a_kernel_not_measured_yet_is_a_miss(api: Client, tmp_path: Path) -> None:
    typo = BestConfigLookup("convolution_kernal", client=api, gpu=H100, cache_file=None)
    with pytest.raises(ApiError, match="the farm has no kernel 'convolution_kernal'") as unknown:
        typo.config({"size_x": 4096})
    assert unknown.value.status == 404
    assert not isinstance(unknown.value, LookupMiss)
    # a kernel the farm knows, never tuned on this GPU model: "no result yet"
    known = BestConfigLookup("convolution_kernel", client=api, gpu=H100, cache_file=tmp_path / "cache.json")
    with pytest.raises(LookupMiss, match="no config of convolution_kernel"):
        known.config({"size_x": 4096})
    with pytest.raises(LookupMiss):  # asked once whether the kernel exists; a miss again
        known.config({"size_x": 2048})
    assert not (tmp_path / "cache.json").exists()
    assert api.kernel("convolution_kernel").name == "convolution_kernel"
