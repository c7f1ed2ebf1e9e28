"""``bayes_llm``: the Bayesian optimizer with an LLM arm (tuner/strategies/llm.py).

Off unless configured: without ``KERNELFARM_LLM_BASE_URL`` and ``KERNELFARM_LLM_MODEL`` it is
``bayes`` exactly. When the arm is due (ArmSchedule) the endpoint is asked for configs; the valid
ones become the model's suggestions (bayes.py: proposed only where the model ranks them among
its best candidates; the batch stays diverse because the model conditions on each pick).
``proposed_by`` maps each accepted config's key to the proposer's name (the coordinator writes it
into the trial's provenance), ``dropped`` counts proposals that failed validation and
``rejected`` valid ones the model turned down (both logged). An endpoint that fails is logged
and the model proposes the whole batch.

A proposal the model took that then measured no faster than every config measured before it (or
is still running) is hidden from the model afterwards, as the warm-start gate hides a failed
probe: the job goes on as if it had not been made, one evaluation later, and the config is
never proposed again. Why: one slow config in the model's data moves every later proposal; with
a confidently wrong proposer that cost 13-23 % in evaluations to 0.95 on gemm_RTX_2080_Ti
(10 / 30 seeds, issue 17's seventh session, docs/benchmarks/STRATEGIES.md), over the 10 % allowed.
A proposal that does pay off (a new best) stays, and the model learns from it.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from typing import ClassVar

import numpy as np

from kernelfarm.core.space import Config
from kernelfarm.core.strategy_options.bayes import BayesSettings
from kernelfarm.core.strategy_options.bayes_llm import GPU_MODEL_OPTION, read_llm_options
from kernelfarm.tuner.strategies.bayes import BayesianOptimizer
from kernelfarm.tuner.strategies.candidates import candidate_table, configs_at
from kernelfarm.tuner.strategies.llm import (
    ORIGIN,
    ArmSchedule,
    ChatProposer,
    Proposer,
    ProposerError,
    summary_request,
    validate,
)

log = logging.getLogger(__name__)


def configured_proposer() -> Proposer | None:
    # Imported here: replaying strategies (benchmarks, the device machine) needs no settings stack.
    from kernelfarm.core.settings import get_settings

    settings = get_settings()
    if not settings.llm_base_url or not settings.llm_model:
        return None
    key = settings.llm_api_key.get_secret_value() if settings.llm_api_key else None
    return ChatProposer(settings.llm_base_url, settings.llm_model, key, settings.llm_timeout_seconds)


class LLMAssistedBayes(BayesianOptimizer):
    """Options: :class:`~kernelfarm.core.strategy_options.bayes_llm.LLMArmSettings` and those of
    ``bayes``; ``gpu_model`` is filled in by the coordinator."""

    name = "bayes_llm"
    wants_gpu_model = True
    # Replaced in benchmarks (replayed oracle / random / adversarial proposers) and tests.
    proposer_factory: ClassVar[Callable[[], Proposer | None]] = staticmethod(configured_proposer)

    def configure(self) -> None:
        self.gpu_model = str(self.options.pop(GPU_MODEL_OPTION, ""))  # the coordinator's, not the job's
        super().configure()
        self.proposed_by: dict[str, str] = {}
        self.dropped = 0
        self.rejected = 0  # valid proposals the model did not rank among its best candidates
        self._proposer_name = ""

    def read_settings(self) -> BayesSettings:
        """The model's settings; the arm's, read beside them as the API checks them all, set when
        the arm gets its slots."""
        arm, model = read_llm_options(self.options, self.name)
        self.schedule = ArmSchedule(arm.llm_period_min, arm.llm_period_max)
        return model

    def ask(self, n: int) -> list[Config]:
        proposals = self._arm(n)
        if proposals:
            table = candidate_table(self.space, self.context)
            rows = table.rows_of(proposals, self.space.names)
            self.suggestions = [int(r) for r in rows if r >= 0]
        configs = super().ask(n)
        accepted = {
            self.space.key(c) for c in configs_at(self.space, candidate_table(self.space, self.context), self.accepted)
        }
        name = self._proposer_name
        self.proposed_by = {key: name for key in accepted}
        self.rejected = len(self.suggestions) - len(accepted)
        if self.suggestions:
            log.info("LLM arm: the model took %d of %d valid proposals", len(accepted), len(self.suggestions))
        return configs

    def _hidden_suggestions(self) -> np.ndarray:
        hidden = super()._hidden_suggestions()
        best = math.inf
        for i, obs in enumerate(self.history):
            value = obs.value if not obs.pending and obs.failure is None else None
            if obs.origin == ORIGIN and (value is None or value >= best):
                hidden[i] = True
            elif value is not None:
                best = min(best, value)
        return hidden

    def _arm(self, n: int) -> list[Config]:
        done = sum(1 for o in self.history if not o.pending)
        if n <= 0 or done < self.settings.n_init or not self.schedule.due(self.history):
            return []
        proposer = type(self).proposer_factory()
        if proposer is None:
            return []
        request = summary_request(self.space, self.context, self.history, self.gpu_model, max(n, 4))
        try:
            raw = proposer.propose(request)
        except ProposerError as exc:
            log.warning("LLM arm skipped: %s", exc)
            return []
        taken = {self.space.key(o.config) for o in self.history}
        valid, dropped = validate(self.space, self.context, raw, taken)
        self.dropped += dropped
        if dropped:
            log.info("LLM arm: %d of %d proposals dropped (invalid, seen or repeated)", dropped, len(raw))
        self._proposer_name = proposer.name
        return valid[: max(n, 4)]  # the model screens them (bayes.py SUGGESTION_QUANTILE)
