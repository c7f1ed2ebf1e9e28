"""The options of the ``bayes_llm`` strategy (tuner/strategies/bayes_llm.py): when its LLM arm gets a
slot, and those of ``bayes`` for its model."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

from kernelfarm.core.errors import InvalidInput
from kernelfarm.core.strategy_options.bayes import BayesSettings
from kernelfarm.core.strategy_options.reading import read_options, refuse_unknown, require_object

# Filled in by the coordinator, never by a job: the GPU the endpoint is told about is the job's own.
GPU_MODEL_OPTION = "gpu_model"


@dataclass(frozen=True)
class LLMArmSettings:
    """Attributes (tuner/strategies/llm.py, ``ArmSchedule``):
    llm_period_min: the arm gets a slot every this many evaluations while its proposals pay
        off (measure faster than the job's median) ...
    llm_period_max: ... and, doubling with each one that does not, at least every this many.
    """

    llm_period_min: int = 4
    llm_period_max: int = 64


ARM_OPTIONS = {field.name for field in fields(LLMArmSettings)}
MODEL_OPTIONS = {field.name for field in fields(BayesSettings)}


def read_llm_options(options: Mapping[str, Any], strategy: str = "bayes_llm") -> tuple[LLMArmSettings, BayesSettings]:
    """The arm's settings and the model's.

    Raises:
        InvalidInput: an option neither the arm nor ``bayes`` knows, ``gpu_model`` (the farm sets
            it), a bad value, or a period range that is empty.
    """
    require_object(options)
    if GPU_MODEL_OPTION in options:
        raise InvalidInput(f"strategy option {GPU_MODEL_OPTION!r} is the job's own GPU model: the farm sets it")
    refuse_unknown(options, ARM_OPTIONS | MODEL_OPTIONS, strategy)
    arm = read_options(LLMArmSettings, {k: v for k, v in options.items() if k in ARM_OPTIONS}, strategy)
    if not 1 <= arm.llm_period_min <= arm.llm_period_max:
        raise InvalidInput("strategy options must have 1 <= 'llm_period_min' <= 'llm_period_max'")
    model = BayesSettings.from_options({k: v for k, v in options.items() if k not in ARM_OPTIONS}, strategy)
    return arm, model
