"""The lookup's cache file is only a cache: a damaged file or entry is a miss (the farm is asked and the
file rewritten), and a cache that cannot be written never fails a lookup the farm answered. The farm is
an httpx transport here (what is under test is the SDK's handling of its own file)."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import httpx
import pytest

from kernelfarm.core.errors import InvalidInput
from kernelfarm.sdk import Client
from kernelfarm.sdk.lookup import BestConfigLookup
from kernelfarm.sdk.triton_autotune import autotune

H100 = "NVIDIA H100 80GB HBM3"
PROBLEM = {"M": 1024, "N": 1024, "K": 1024}


def best_answer(request: httpx.Request) -> httpx.Response:
    assert request.url.path == "/v1/best"
    return httpx.Response(200, json={
        "kernel": "matmul_demo", "gpu_model": "nvidia-h100-80gb-hbm3", "problem": PROBLEM, "match": "exact",
        "matched_gpu_model": "nvidia-h100-80gb-hbm3", "matched_problem": PROBLEM, "config": {"block_size_m": 64},
        "config_key": "block_size_m=64", "time_ms": 0.5, "time_p20_ms": None, "time_p80_ms": None, "trial_id": 1,
        "job_id": "00000000-0000-0000-0000-000000000001", "provenance": {},
    })  # fmt: skip


class Farm:
    """Counts the farm's answers: a cache hit asks nothing."""

    def __init__(self) -> None:
        self.asked = 0

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.asked += 1
        return best_answer(request)


def lookup(cache_file: Path | str, farm: Farm) -> BestConfigLookup:
    client = Client("http://farm.test", "kf_test", transport=httpx.MockTransport(farm), retries=0)
    return BestConfigLookup("matmul_demo", client=client, gpu=H100, cache_file=cache_file)


GOOD_ENTRY: dict[str, Any] = {
    "fetched_at": 0.0,  # replaced by now in the tests
    "result": {"config": {"block_size_m": 32}, "match": "exact", "gpu_model": "nvidia-h100-80gb-hbm3",
               "problem": PROBLEM, "time_ms": 0.25},
}  # fmt: skip
KEY = "matmul_demo|nvidia-h100-80gb-hbm3|K=1024,M=1024,N=1024"


def test_a_good_entry_is_a_hit(tmp_path: Path) -> None:
    import time

    cache = tmp_path / "cache.json"
    cache.write_text(json.dumps({"version": 1, "entries": {KEY: {**GOOD_ENTRY, "fetched_at": time.time()}}}))
    farm = Farm()
    found = lookup(cache, farm).config(PROBLEM)
    assert (found.source, found.config, farm.asked) == ("cache", {"block_size_m": 32}, 0)


@pytest.mark.parametrize(
    "content",
    [
        "[]",
        '{"entries": []}',
        '"x"',
        "{not json",
        b"\xff\xfe{}",
        json.dumps({"entries": {KEY: "x"}}),
        json.dumps({"entries": {KEY: {"result": GOOD_ENTRY["result"]}}}),  # no fetched_at
        json.dumps({"entries": {KEY: {"fetched_at": "yesterday", "result": GOOD_ENTRY["result"]}}}),
        json.dumps({"entries": {KEY: {"fetched_at": 1e300, "result": {**GOOD_ENTRY["result"], "extra": 1}}}}),
        json.dumps({"entries": {KEY: {"fetched_at": 1e300, "result": {"config": {}}}}}),  # fields missing
        json.dumps({"entries": {KEY: {"fetched_at": 1e300, "result": {**GOOD_ENTRY["result"], "time_ms": "1"}}}}),
        json.dumps({"entries": {KEY: {"fetched_at": 1e300, "result": []}}}),
    ],
    ids=[
        "list",
        "entries-list",
        "string",
        "not-json",
        "not-utf8",
        "entry-string",
        "no-fetched_at",
        "fetched_at-string",
        "extra-field",
        "missing-fields",
        "time-string",
        "result-list",
    ],
)
def test_a_damaged_cache_is_a_miss_and_is_rewritten(content: str | bytes, tmp_path: Path) -> None:
    cache = tmp_path / "cache.json"
    if isinstance(content, bytes):
        cache.write_bytes(content)
    else:
        cache.write_text(content)
    farm = Farm()
    found = lookup(cache, farm).config(PROBLEM)
    assert (found.source, found.config, farm.asked) == ("farm", {"block_size_m": 64}, 1)
    # the farm's answer replaced the damaged file: the next lookup is a hit
    again = lookup(cache, farm).config(PROBLEM)
    assert (again.source, again.config, farm.asked) == ("cache", {"block_size_m": 64}, 1)
    assert list(json.loads(cache.read_text())["entries"]) == [KEY]


@pytest.mark.parametrize("where", ["/proc/kernelfarm-no-such/cache.json", "file-as-folder"])
def test_an_unwritable_cache_does_not_fail_the_lookup(
    where: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    if where == "file-as-folder":  # a read-only home does the same (mkdir/mkstemp fail), also as root
        (tmp_path / "home").write_text("a file")
        where = str(tmp_path / "home" / ".cache" / "cache.json")
    farm = Farm()
    with caplog.at_level(logging.WARNING, logger="kernelfarm.sdk.lookup"):
        lookups = lookup(where, farm)
        first, second = lookups.config(PROBLEM), lookups.config(PROBLEM)
    assert (first.source, second.source, farm.asked) == ("farm", "farm", 2)
    warnings = [r for r in caplog.records if "not written" in r.getMessage()]
    assert len(warnings) == 1, caplog.records  # once, not at every lookup
    assert list(tmp_path.iterdir()) in ([], [tmp_path / "home"])  # no temporary file left anywhere


def test_a_non_utf8_export_is_invalid_input(tmp_path: Path) -> None:
    export = tmp_path / "matmul_demo.json"
    export.write_bytes(b'{"kernel": "\xff"}')
    with pytest.raises(InvalidInput, match=r"not UTF-8 text \(byte 0xff at offset 12\)"):
        BestConfigLookup("matmul_demo", export=export, gpu=H100, cache_file=None)
    triton_file = tmp_path / "my_matmul.json"
    triton_file.write_bytes(b"\x80{}")
    with pytest.raises(InvalidInput, match="not UTF-8 text"):
        autotune([], ["M"], kernel="my_matmul", export=triton_file, autotune_factory=lambda **_: None)(object())
