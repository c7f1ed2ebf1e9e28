"""The LLM arm (tuner/strategies/llm.py, bayes_llm.py) against an OpenAI-compatible endpoint.

No language model is reachable from the test machines, so these tests start a small
OpenAI-compatible HTTP server of their own (``POST /v1/chat/completions``) that answers
deterministically: it stands in for a remote endpoint, and the client under test is the real
httpx one, over a real socket.
"""

from __future__ import annotations

import gzip
import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from kernelfarm.core.space import Config
from kernelfarm.core.states import FailureKind
from kernelfarm.tuner.strategies.base import Observation
from kernelfarm.tuner.strategies.bayes import BayesianOptimizer
from kernelfarm.tuner.strategies.bayes_llm import LLMAssistedBayes
from kernelfarm.tuner.strategies.llm import (
    MAX_ANSWER_BYTES,
    MAX_ARRAY_STARTS,
    ArmSchedule,
    ChatProposer,
    ProposerError,
    parse_proposals,
    summary_request,
    validate,
)
from tests.tuner.conftest import CONTEXT, SPACE, drive, objective

GOOD: Config = {"bx": 8, "by": 2, "tile": 3, "layout": "tiled", "fixed": 7}
ANSWER = [
    {"bx": 64, "by": 2, "tile": 3, "layout": "tiled", "fixed": 7},  # unlisted value
    {"bx": 32, "by": 8, "tile": 3, "layout": "row", "fixed": 7},  # violates bx * by <= 128
    {"bx": 8, "by": 2, "tile": 3},  # parameters missing
    GOOD,
    GOOD,  # a repeat
]


class Endpoint:
    """A deterministic OpenAI-compatible chat endpoint on a free local port."""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        self.fail = False
        self.answer: list[object] = list(ANSWER)
        self.content: str | None = None  # the answer's text as sent, instead of ``answer`` in prose
        self.body: bytes | None = None  # the whole response body as sent, instead of a chat answer
        self.drip_seconds: float | None = None  # send the body a byte at a time, this far apart
        self.gzip = False  # send the body gzip-compressed (Content-Encoding: gzip), asked or not
        self.stopping = threading.Event()
        endpoint = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                endpoint.requests.append(body)
                endpoint.headers.append(dict(self.headers))
                if endpoint.fail or self.path != "/v1/chat/completions":
                    self.send_response(500 if endpoint.fail else 404)
                    self.end_headers()
                    return
                content = endpoint.content
                if content is None:
                    content = "Here you go:\n```json\n" + json.dumps(endpoint.answer) + "\n```"
                payload = (
                    endpoint.body
                    or json.dumps({"choices": [{"message": {"role": "assistant", "content": content}}]}).encode()
                )
                if endpoint.gzip:
                    payload = gzip.compress(payload)
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                if endpoint.gzip:
                    self.send_header("Content-Encoding", "gzip")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                if endpoint.drip_seconds is None:
                    self.wfile.write(payload)
                    return
                for i in range(len(payload)):  # until the client hangs up, or the test ends
                    if endpoint.stopping.wait(endpoint.drip_seconds):
                        return
                    try:
                        self.wfile.write(payload[i : i + 1])
                        self.wfile.flush()
                    except OSError:
                        return

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> Endpoint:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stopping.set()
        self.server.shutdown()
        self.server.server_close()
        self.thread.join()


@pytest.fixture
def endpoint() -> Iterator[Endpoint]:
    with Endpoint() as e:
        yield e


def _history(n: int) -> list[Observation]:
    return drive(LLMAssistedBayes, SPACE, CONTEXT, steps=n, batch=1, options={"n_init": 4})


def test_parse_and_validate_drop_and_count_bad_proposals() -> None:
    assert parse_proposals("no json here [not json") == []
    assert parse_proposals("say [1, 2] then") == [1, 2]
    taken = {SPACE.key({"bx": 1, "by": 1, "tile": 1, "layout": "row", "fixed": 7})}
    valid, dropped = validate(
        SPACE, CONTEXT, [*ANSWER, "text", {"bx": 1, "by": 1, "tile": 1, "layout": "row", "fixed": 7}], taken
    )
    assert valid == [GOOD] and dropped == 6


def test_chat_proposer_sends_space_history_and_gpu(endpoint: Endpoint) -> None:
    history = _history(6)
    request = summary_request(SPACE, CONTEXT, history, "nvidia-h100", 4)
    proposals = ChatProposer(endpoint.url, "tiny-model", "sekret").propose(request)
    assert proposals == ANSWER
    sent = endpoint.requests[0]
    assert sent["model"] == "tiny-model" and endpoint.headers[0]["Authorization"] == "Bearer sekret"
    prompt = sent["messages"][-1]["content"]
    assert "nvidia-h100" in prompt and '"layout": ["row", "col", "tiled"]' in prompt and "bx * by <= 128" in prompt
    endpoint.fail = True
    with pytest.raises(ProposerError):
        ChatProposer(endpoint.url, "tiny-model", None).propose(request)


def test_the_model_screens_proposals_and_marks_the_ones_it_takes(
    endpoint: Endpoint, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(
        LLMAssistedBayes, "proposer_factory", staticmethod(lambda: ChatProposer(endpoint.url, "m", None))
    )
    history = [o for o in _history(8) if SPACE.key(o.config) != SPACE.key(GOOD)]
    options = {"n_init": 4, "gpu_model": "gpu-x"}
    # What the model itself would propose first: a proposal equal to it ranks at the top.
    (favourite,) = BayesianOptimizer.from_history(SPACE, CONTEXT, history, 0, {"n_init": 4}).ask(1)
    seen = {SPACE.key(o.config) for o in history}
    unseen = [c for c in SPACE.valid_configs(CONTEXT) if SPACE.key(c) not in seen and objective(c) is not None]
    worst = max(unseen, key=lambda c: objective(c) or 0.0)
    endpoint.answer = [*ANSWER[:3], worst, favourite]
    optimizer = LLMAssistedBayes.from_history(SPACE, CONTEXT, history, 0, options)
    batch = optimizer.ask(4)
    assert batch[0] == favourite and len({SPACE.key(c) for c in batch}) == 4
    assert all(SPACE.contains(c, CONTEXT) for c in batch)
    assert optimizer.proposed_by == {SPACE.key(favourite): "llm:m"}  # marked for the trial's provenance
    assert optimizer.dropped == 3  # unlisted value, constraint, missing parameters
    assert optimizer.rejected == 1 and worst not in batch  # the slowest config: the model says no
    assert "gpu-x" in endpoint.requests[-1]["messages"][-1]["content"]


def test_a_failing_endpoint_leaves_the_model_to_propose(endpoint: Endpoint, monkeypatch: pytest.MonkeyPatch) -> None:
    endpoint.fail = True
    monkeypatch.setattr(
        LLMAssistedBayes, "proposer_factory", staticmethod(lambda: ChatProposer(endpoint.url, "m", None))
    )
    optimizer = LLMAssistedBayes.from_history(SPACE, CONTEXT, _history(6), 0, {"n_init": 4})
    assert len(optimizer.ask(3)) == 3 and optimizer.proposed_by == {}


def test_an_endpoint_that_drips_its_answer_is_cut_off_at_the_timeout(endpoint: Endpoint) -> None:
    """httpx's timeout bounds each read: an answer sent a byte every 0.1 s held the coordinator's
    process for as long as the endpoint kept sending (here 40 s; without end for a broken one)."""
    endpoint.body = json.dumps({"choices": [{"message": {"content": "[]"}}]}).encode() + b" " * 400
    endpoint.drip_seconds = 0.1
    request = summary_request(SPACE, CONTEXT, _history(6), "gpu-x", 4)
    started = time.monotonic()
    with pytest.raises(ProposerError, match="no whole answer within 1 s"):
        ChatProposer(endpoint.url, "m", None, timeout=1.0).propose(request)
    assert time.monotonic() - started < 3.0  # the deadline, plus one read at most


def test_an_answer_too_long_is_refused_not_read_whole(endpoint: Endpoint) -> None:
    endpoint.body = json.dumps({"choices": [{"message": {"content": json.dumps([GOOD])}}]}).encode()
    endpoint.body += b" " * MAX_ANSWER_BYTES  # valid JSON, one config, 1 MiB of padding
    request = summary_request(SPACE, CONTEXT, _history(6), "gpu-x", 4)
    with pytest.raises(ProposerError, match=f"answer longer than {MAX_ANSWER_BYTES} bytes"):
        ChatProposer(endpoint.url, "m", None).propose(request)


def test_a_compressed_answer_is_refused_before_it_is_inflated(endpoint: Endpoint) -> None:
    """httpx inflates each compressed chunk whole before the length check sees it: a 300 kB gzip
    answer took 143 MB of memory before it was refused. Identity is asked for, anything else refused
    by its header (this answer is small and valid: it was taken before)."""
    endpoint.body = json.dumps({"choices": [{"message": {"content": json.dumps([GOOD])}}]}).encode()
    endpoint.gzip = True
    request = summary_request(SPACE, CONTEXT, _history(6), "gpu-x", 4)
    with pytest.raises(ProposerError, match="Content-Encoding 'gzip'; identity was asked for"):
        ChatProposer(endpoint.url, "m", None).propose(request)
    assert endpoint.headers[-1]["Accept-Encoding"] == "identity"


@pytest.mark.parametrize("where", ["content", "body", "digits"])
def test_an_answer_nested_too_deep_is_no_answer_and_the_model_proposes(
    endpoint: Endpoint, monkeypatch: pytest.MonkeyPatch, where: str
) -> None:
    """The parse raised RecursionError, which no caller caught: the coordinator's step for the job
    failed, and again at every step while the endpoint answered so. So did an integer longer than
    Python converts (ValueError: "Exceeds the limit (4300 digits)")."""
    if where == "content":
        endpoint.content = "[" * 100_000
    elif where == "digits":
        endpoint.content = "[" + "1" * 5000 + "]"
    else:
        endpoint.body = b"[" * 100_000
    history = _history(6)
    monkeypatch.setattr(
        LLMAssistedBayes, "proposer_factory", staticmethod(lambda: ChatProposer(endpoint.url, "m", None))
    )
    optimizer = LLMAssistedBayes.from_history(SPACE, CONTEXT, history, 0, {"n_init": 4})
    assert len(optimizer.ask(3)) == 3 and optimizer.proposed_by == {}
    assert len(endpoint.requests) == 1  # the endpoint was asked: its answer was what failed


def test_an_answer_of_many_brackets_is_tried_at_a_bounded_number_of_places(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each "[" was tried as the array's start, on a copy of the rest of the text: 200 kB of "x[" took
    1.4 s on one core, growing with the square of the length."""
    tries: list[int] = []
    raw_decode = json.JSONDecoder.raw_decode

    def counted(self: json.JSONDecoder, text: str, idx: int = 0) -> tuple[Any, int]:
        tries.append(idx)
        return raw_decode(self, text, idx)

    monkeypatch.setattr(json.JSONDecoder, "raw_decode", counted)
    assert parse_proposals("x[" * 500_000 + "]") == []
    assert len(tries) == MAX_ARRAY_STARTS
    assert parse_proposals("x[" * (MAX_ARRAY_STARTS - 1) + "[1]") == [1]  # the last bracket tried


def test_unconfigured_it_is_bayes() -> None:
    assert LLMAssistedBayes.proposer_factory() is None  # no KERNELFARM_LLM_* in the test environment


def test_schedule_backs_off_from_a_bad_proposer_and_returns_to_a_good_one() -> None:
    schedule = ArmSchedule(period_min=4, period_max=64)
    own = [Observation(GOOD | {"tile": t}, float(t)) for t in (1, 2, 3, 5)]  # median 2.5
    bad = [Observation(GOOD, None, FailureKind.LAUNCH, origin="llm")]
    assert schedule.period(own) == 4
    assert schedule.period(own + bad) == 8
    assert schedule.period(own + bad + bad) == 16
    good = Observation(GOOD, 1.0, origin="llm")
    assert schedule.period(own + bad + bad + [good]) == 8
    assert not schedule.due(own + bad)  # one evaluation since its last proposal, period 8
    assert schedule.due(own)  # never asked yet
    assert objective(GOOD) is not None


def test_a_proposal_that_did_not_pay_off_is_hidden_and_one_that_did_stays() -> None:
    """The model's data and random draws are those of the job without the proposal (one evaluation
    later); the config is never proposed again. A new best from the arm is kept."""
    design = drive(BayesianOptimizer, SPACE, CONTEXT, steps=12, batch=1)
    best = min(o.value for o in design if o.value is not None)
    tried = {tuple(sorted(o.config.items())) for o in design}
    others = [c for c in SPACE.valid_configs(CONTEXT) if tuple(sorted(c.items())) not in tried]
    slow = Observation(others[0], best * 3, origin="llm")
    faster = Observation(others[1], best / 2, origin="llm")
    running = Observation(others[2], None, pending=True, origin="llm")

    def arm_off(history: list[Observation]) -> LLMAssistedBayes:
        return LLMAssistedBayes.from_history(SPACE, CONTEXT, history, 0)  # unconfigured: no new proposals

    hidden = arm_off([*design, slow, faster, running])._hidden_suggestions()
    assert hidden.tolist() == [False] * 12 + [True, False, True]
    after_slow = arm_off([*design, slow]).ask(2)
    assert after_slow == BayesianOptimizer.from_history(SPACE, CONTEXT, design, 0).ask(2)
    assert others[0] not in after_slow
    # a plain bayes job learns from every trial, whoever proposed it
    assert not BayesianOptimizer.from_history(SPACE, CONTEXT, [*design, slow], 0)._hidden_suggestions().any()
