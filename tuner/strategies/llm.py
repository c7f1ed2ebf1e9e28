"""Configurations proposed by a language model, as one arm of the Bayesian optimizer.

The model is asked over an OpenAI-compatible chat-completions endpoint (base URL, model and key
from Settings: ``KERNELFARM_LLM_BASE_URL``, ``KERNELFARM_LLM_MODEL``, ``KERNELFARM_LLM_API_KEY``;
the arm is off unless they are set) for configurations, given the space (parameters, values,
constraints), a summary of the job's history (the best configs with their times, how many
failed) and the GPU model. Its answer is untrusted text: configs are parsed from the first JSON
array in it, and every one that is not a valid member of the space (unknown or missing
parameter, unlisted value, constraint violated), already observed or pending, or a repeat is
dropped and counted. The endpoint is untrusted too: it is asked from the coordinator, whose few
processes step every job, so an answer is read within ``MAX_ANSWER_BYTES`` and the timeout as a
whole (not per read), and no text it sends can make the parse raise or run long.

Why an *arm*, and why screened: a proposer can be a perfect oracle or confidently wrong, and the
farm cannot know which before it has seen outcomes. So the valid proposals go to the Bayesian
model as suggestions, and it proposes one only where it ranks it among the top 5 % of its own
candidates by acquisition (bayes.py ``SUGGESTION_QUANTILE``): a proposal the model already
believes is slow or failing costs no evaluation. The endpoint is asked once every ``period``
evaluations (ArmSchedule), the period doubling each time an accepted model proposal finished
without beating the median of the job's results and halving when one did
(docs/benchmarks/STRATEGIES.md has the replay measurements).
"""

from __future__ import annotations

import json
import re
import statistics
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import httpx

from kernelfarm.core.errors import KernelfarmError
from kernelfarm.core.space import Config, SearchSpace
from kernelfarm.tuner.strategies.base import Observation

ORIGIN = "llm"
# Most bytes of an endpoint's answer read: a chat answer listing configs is a few kB. Unbounded, an
# endpoint that streamed without end held a coordinator process and its memory.
MAX_ANSWER_BYTES = 1 << 20
# Most "[" in an answer tried as the start of its JSON array: each try may scan the rest of the
# text, so an answer of many brackets cost the square of its length.
MAX_ARRAY_STARTS = 64
SYSTEM_PROMPT = (
    "You tune GPU kernels. Propose configurations likely to run fastest on the given GPU. "
    "Answer with a JSON array of objects, one per configuration, mapping every parameter name "
    "to one of its listed values, and nothing else."
)


@dataclass(frozen=True)
class ProposalRequest:
    """What the proposer is told: the space, the job's history summary, the GPU, how many."""

    space: SearchSpace
    context: Mapping[str, Any]
    best: list[tuple[Config, float]]  # the job's fastest configs, fastest first, with ms
    failed: int
    observed: int
    gpu_model: str
    n: int

    def prompt(self) -> str:
        parameters = {p.name: list(p.values) for p in self.space.parameters}
        lines = [
            f"GPU: {self.gpu_model or 'unknown'}",
            f"Problem: {json.dumps(dict(self.context), default=str)}",
            f"Parameters and allowed values: {json.dumps(parameters, default=str)}",
            f"Constraints (Python expressions that must hold): {json.dumps(list(self.space.constraints))}",
            f"Measured so far: {self.observed} configurations, {self.failed} failed.",
            "Fastest so far (ms): " + json.dumps([{"config": c, "ms": round(t, 6)} for c, t in self.best], default=str),
            f"Propose {self.n} new configurations as a JSON array.",
        ]
        return "\n".join(lines)


class Proposer(Protocol):
    """Anything that answers a ProposalRequest with candidate configs (unvalidated)."""

    name: str

    def propose(self, request: ProposalRequest) -> list[Any]: ...


class ProposerError(KernelfarmError):
    """The endpoint could not be asked or its answer could not be read."""


class ChatProposer:
    """An OpenAI-compatible ``POST {base_url}/chat/completions`` client."""

    def __init__(self, base_url: str, model: str, api_key: str | None, timeout: float = 20.0) -> None:
        self.base_url = base_url.rstrip("/")
        self.model = model
        self.name = f"{ORIGIN}:{model}"
        self._headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._timeout = timeout

    def propose(self, request: ProposalRequest) -> list[Any]:
        body = {
            "model": self.model,
            "messages": [
                {"role": "system", "content": SYSTEM_PROMPT},
                {"role": "user", "content": request.prompt()},
            ],
            "temperature": 0.2,
        }
        try:
            answer = json.loads(self._read_answer(body))
            content = answer["choices"][0]["message"]["content"]
        except (httpx.HTTPError, ValueError, KeyError, IndexError, TypeError, RecursionError) as exc:
            raise ProposerError(f"LLM endpoint {self.base_url}: {exc}") from exc
        return parse_proposals(str(content))

    def _read_answer(self, body: dict[str, Any]) -> bytes:
        """The answer's body, read within ``MAX_ANSWER_BYTES`` and the timeout as a whole: httpx's
        timeout bounds each read, so an endpoint sending a byte now and then was never cut off. The
        total can pass the deadline by one read's timeout (a read that began before it)."""
        deadline = time.monotonic() + self._timeout
        url = f"{self.base_url}/chat/completions"
        # Uncompressed only, read raw: httpx inflates each compressed chunk whole before the length
        # check sees it (a 300 kB gzip answer took 143 MB of memory before it was refused).
        headers = {**self._headers, "Accept-Encoding": "identity"}
        with httpx.stream("POST", url, json=body, headers=headers, timeout=self._timeout) as response:
            response.raise_for_status()
            encoding = response.headers.get("content-encoding", "identity").strip().lower()
            if encoding not in ("", "identity"):
                raise ValueError(f"answer sent with Content-Encoding {encoding[:32]!r}; identity was asked for")
            received = bytearray()
            for chunk in response.iter_raw():
                received += chunk
                if len(received) > MAX_ANSWER_BYTES:
                    raise ValueError(f"answer longer than {MAX_ANSWER_BYTES} bytes")
                if time.monotonic() > deadline:
                    raise ValueError(f"no whole answer within {self._timeout:g} s")
        return bytes(received)


def parse_proposals(text: str) -> list[Any]:
    """The first JSON array in ``text`` (models wrap answers in prose or code fences) among its first
    ``MAX_ARRAY_STARTS`` brackets; [] if none. Arrays nested deeper than the parser's recursion limit,
    or holding an integer longer than Python converts (ValueError), are no array: they failed the
    coordinator's step for the job."""
    decoder = json.JSONDecoder()
    for tries, match in enumerate(re.finditer(r"\[", text)):
        if tries == MAX_ARRAY_STARTS:
            break
        try:
            value, _ = decoder.raw_decode(text, match.start())
        except (ValueError, RecursionError):  # JSONDecodeError, and an integer of over 4,300 digits
            continue
        if isinstance(value, list):
            return value
    return []


def validate(
    space: SearchSpace, context: Mapping[str, Any], proposals: Sequence[Any], taken: set[str]
) -> tuple[list[Config], int]:
    """(valid new configs, number dropped). ``taken``: keys observed, pending or already chosen."""
    names = set(space.names)
    valid: list[Config] = []
    dropped = 0
    seen = set(taken)
    for item in proposals:
        if not isinstance(item, dict) or set(item) != names or not space.contains(item, context):
            dropped += 1
            continue
        config = {name: _listed(space, name, item[name]) for name in space.names}
        key = space.key(config)
        if key in seen:
            dropped += 1
            continue
        seen.add(key)
        valid.append(config)
    return valid, dropped


def _listed(space: SearchSpace, name: str, value: Any) -> Any:
    """The space's own value equal to ``value`` (JSON gives 1.0 for 1 and lists for tuples)."""
    for parameter in space.parameters:
        if parameter.name == name:
            for listed in parameter.values:
                if listed == value:
                    return listed
    return value


@dataclass(frozen=True)
class ArmSchedule:
    """When the arm gets a slot: every ``period`` evaluations, adapted to its own record (its bounds:
    core/strategy_options/bayes_llm.py, ``LLMArmSettings``)."""

    period_min: int
    period_max: int

    def period(self, history: Sequence[Observation]) -> int:
        done = [o for o in history if not o.pending]
        times = [o.value for o in done if o.value is not None and o.failure is None]
        if not times:
            return self.period_min
        median = statistics.median(times)
        period = self.period_min
        for obs in done:
            if obs.origin != ORIGIN:
                continue
            good = obs.value is not None and obs.failure is None and obs.value < median
            period = max(self.period_min, period // 2) if good else min(self.period_max, period * 2)
        return period

    def due(self, history: Sequence[Observation]) -> bool:
        """True when no model proposal is pending and ``period`` evaluations passed since the last."""
        if any(o.pending and o.origin == ORIGIN for o in history):
            return False
        since = 0
        for obs in reversed(history):
            if obs.origin == ORIGIN:
                break
            since += 1
        else:
            since = len(history) + self.period_max  # never asked yet: due once the design has data
        return since >= self.period(history)


def summary_request(
    space: SearchSpace, context: Mapping[str, Any], history: Sequence[Observation], gpu_model: str, n: int
) -> ProposalRequest:
    done = [o for o in history if not o.pending]
    ok = sorted((o for o in done if o.value is not None and o.failure is None), key=lambda o: o.value or 0.0)
    return ProposalRequest(
        space=space,
        context=context,
        best=[(o.config, float(o.value or 0.0)) for o in ok[:10]],
        failed=sum(1 for o in done if o.value is None or o.failure is not None),
        observed=len(done),
        gpu_model=gpu_model,
        n=n,
    )
