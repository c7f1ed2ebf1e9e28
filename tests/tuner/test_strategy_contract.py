"""The contract every strategy keeps (tuner/strategies/base.py), run over the whole registry."""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import pytest

from kernelfarm.core.errors import InvalidInput
from kernelfarm.core.space import Config, SearchSpace
from kernelfarm.core.states import FailureKind
from kernelfarm.core.strategy_names import DEFAULT_STRATEGY as API_DEFAULT
from kernelfarm.core.strategy_names import STRATEGY_NAMES
from kernelfarm.core.strategy_options import OPTION_READERS, check_strategy_options
from kernelfarm.tuner.strategies.base import Observation, Optimizer
from kernelfarm.tuner.strategies.bayes_llm import LLMAssistedBayes
from kernelfarm.tuner.strategies.registry import DEFAULT_STRATEGY, STRATEGIES, get_strategy
from tests.tuner.conftest import CONTEXT, SPACE, TINY, drive, objective

# Model-based strategies reach their model phase quickly with these options.
FAST = {"bayes": {"n_init": 4}, "bayes_llm": {"n_init": 4}, "genetic": {"population": 6}}
ALL = sorted(STRATEGIES)


def options(name: str) -> dict[str, object]:
    return dict(FAST.get(name, {}))


def keys(configs: list[Config]) -> list[str]:
    return [SPACE.key(c) for c in configs]


def test_api_names_match_the_registry() -> None:
    assert set(STRATEGY_NAMES) == set(STRATEGIES)
    assert API_DEFAULT == DEFAULT_STRATEGY
    assert DEFAULT_STRATEGY in STRATEGIES


def test_every_strategy_has_its_options_in_core() -> None:
    assert set(OPTION_READERS) == set(STRATEGIES)


# Options of every strategy, right and wrong: the API's check and the strategy must agree on each.
OPTION_SAMPLES: list[dict[str, object]] = [
    {}, {"no_such_option": 1}, {"n_init": 4}, {"n_init": 0}, {"n_init": "4"}, {"n_init": 4.0}, {"n_init": True},
    {"xi": 1}, {"xi": 10**400}, {"pool": -(2**40)}, {"transfer": 0}, {"acquisition": "ucb"}, {"gate_nulls": 1},
    {"prior_consensus": 1.5}, {"population": 6}, {"population": 1}, {"mutation": 0.5}, {"mutation": 2.0},
    {"tournament": 0}, {"llm_period_min": 2}, {"llm_period_min": 0}, {"llm_period_min": 9, "llm_period_max": 8},
    {"llm_period_max": "64"}, {"population": 6, "tournament": 7}, {"llm_period_min": 2, "population": 6},
]  # fmt: skip


def refusal(call: Callable[[], object]) -> str | None:
    try:
        call()
    except InvalidInput as exc:
        return str(exc)
    return None


@pytest.mark.parametrize("name", ALL)
@pytest.mark.parametrize("sample", range(len(OPTION_SAMPLES)))
def test_the_api_refuses_exactly_what_the_strategy_refuses(name: str, sample: int) -> None:
    options = OPTION_SAMPLES[sample]
    api = refusal(lambda: check_strategy_options(name, options))
    built = refusal(lambda: get_strategy(name).from_history(SPACE, CONTEXT, [], 0, options))
    assert api == built


@pytest.mark.parametrize("name", ALL)
def test_an_option_the_strategy_does_not_know_is_refused_not_ignored(name: str) -> None:
    with pytest.raises(InvalidInput, match=f"unknown options for strategy '{name}': \\['no_such_option'\\]"):
        get_strategy(name).from_history(SPACE, CONTEXT, [], 0, {"no_such_option": 1})


def test_only_the_coordinator_tells_the_llm_arm_its_gpu() -> None:
    with pytest.raises(InvalidInput, match="the farm sets it"):
        check_strategy_options("bayes_llm", {"gpu_model": "nvidia-h100"})
    optimizer = get_strategy("bayes_llm").from_history(SPACE, CONTEXT, [], 0, {"gpu_model": "nvidia-h100"})
    assert isinstance(optimizer, LLMAssistedBayes) and optimizer.gpu_model == "nvidia-h100"


@pytest.mark.parametrize("name", ALL)
def test_proposals_are_valid_distinct_and_new(name: str) -> None:
    def check(configs: list[Config], history: list[Observation]) -> None:
        assert len(configs) == 5
        assert all(SPACE.contains(c, CONTEXT) for c in configs)
        assert len(set(keys(configs))) == len(configs)
        assert not set(keys(configs)) & {SPACE.key(o.config) for o in history}

    history = drive(get_strategy(name), SPACE, CONTEXT, steps=8, batch=5, options=options(name), check=check)
    assert len(history) == 40


@pytest.mark.parametrize("name", ALL)
def test_configs_hold_plain_python_values(name: str) -> None:
    history = drive(get_strategy(name), SPACE, CONTEXT, steps=3, batch=3, options=options(name))
    configs = get_strategy(name).from_history(SPACE, CONTEXT, history, 1, options(name)).ask(4)
    for config in configs:
        for value in config.values():
            assert type(value) in (int, float, str), (name, type(value))


@pytest.mark.parametrize("name", ALL)
def test_deterministic_for_a_seed(name: str) -> None:
    runs = [
        drive(get_strategy(name), SPACE, CONTEXT, steps=5, batch=3, seed=7, options=options(name)) for _ in range(2)
    ]
    assert keys([o.config for o in runs[0]]) == keys([o.config for o in runs[1]])
    other = drive(get_strategy(name), SPACE, CONTEXT, steps=5, batch=3, seed=8, options=options(name))
    assert keys([o.config for o in other]) != keys([o.config for o in runs[0]])


@pytest.mark.parametrize("name", ALL)
def test_pending_configs_are_not_proposed_again(name: str) -> None:
    history = drive(get_strategy(name), SPACE, CONTEXT, steps=3, batch=4, options=options(name))
    first = get_strategy(name).from_history(SPACE, CONTEXT, history, 0, options(name)).ask(4)
    pending = history + [Observation(c, None, pending=True) for c in first]
    second = get_strategy(name).from_history(SPACE, CONTEXT, pending, 0, options(name)).ask(4)
    assert len(second) == 4
    assert not set(keys(first)) & set(keys(second))


@pytest.mark.parametrize("name", ALL)
def test_fewer_only_when_exhausted(name: str) -> None:
    valid = TINY.valid_configs()
    assert len(valid) == 5
    history: list[Observation] = []
    proposed = get_strategy(name).from_history(TINY, {}, history, 0, options(name)).ask(3)
    assert len(proposed) == 3
    history += [Observation(c, float(c["a"])) for c in proposed]
    rest = get_strategy(name).from_history(TINY, {}, history, 0, options(name)).ask(10)
    assert sorted(TINY.key(c) for c in proposed + rest) == sorted(TINY.key(c) for c in valid)
    history += [Observation(c, None, FailureKind.COMPILE) for c in rest]
    assert get_strategy(name).from_history(TINY, {}, history, 0, options(name)).ask(2) == []
    assert get_strategy(name).from_history(TINY, {}, [], 0, options(name)).ask(0) == []


@pytest.mark.parametrize("name", ALL)
@pytest.mark.parametrize("last", [0, 1, 4])
def test_the_last_free_config_is_proposed(name: str, last: int) -> None:
    """With every valid config but one measured, and the model past its design, every strategy proposes
    that one. bayes never proposed the table's first row from its model (a variable holding the prior's
    noise, zeros, shadowed the local arm's rows, and 0.0 matched row 0): a job over 8 configs ended
    "space exhausted" after 7."""
    opts = {"n_init": 1} if name.startswith("bayes") else {"population": 2} if name == "genetic" else {}
    valid = TINY.valid_configs()
    history = [Observation(c, float(c["a"]) * float(c["b"])) for i, c in enumerate(valid) if i != last]
    proposed = get_strategy(name).from_history(TINY, {}, history, 0, opts).ask(1)
    assert [TINY.key(c) for c in proposed] == [TINY.key(valid[last])]
    history.append(Observation(proposed[0], 1.0))
    assert get_strategy(name).from_history(TINY, {}, history, 0, opts).ask(1) == []


@pytest.mark.parametrize("name", ALL)
def test_history_outside_the_space_is_ignored(name: str) -> None:
    stranger: Config = {"bx": 64, "by": 1, "tile": 1, "layout": "row", "fixed": 7}  # 64 is not a value of bx
    history = [Observation(stranger, 1.0), Observation({"bx": 1}, 2.0)]
    configs = get_strategy(name).from_history(SPACE, CONTEXT, history, 0, options(name)).ask(3)
    assert len(configs) == 3 and all(SPACE.contains(c, CONTEXT) for c in configs)


@pytest.mark.parametrize("name", ALL)
def test_all_failures_so_far_still_proposes(name: str) -> None:
    history = [Observation(c, None, FailureKind.LAUNCH) for c in SPACE.valid_configs(CONTEXT)[:12]]
    configs = get_strategy(name).from_history(SPACE, CONTEXT, history, 0, options(name)).ask(4)
    assert len(configs) == 4 and not set(keys(configs)) & set(keys([o.config for o in history]))


@pytest.mark.parametrize("name", ALL)
def test_prior_observations_are_usable(name: str) -> None:
    prior = [
        Observation(c, objective(c), None if objective(c) else FailureKind.LAUNCH)
        for c in SPACE.valid_configs(CONTEXT)[::7]
    ]
    history = drive(get_strategy(name), SPACE, CONTEXT, steps=2, batch=3, options=options(name))
    configs = get_strategy(name).from_history(SPACE, CONTEXT, history, 0, options(name), prior=prior).ask(4)
    assert len(configs) == 4 and all(SPACE.contains(c, CONTEXT) for c in configs)
    assert not set(keys(configs)) & set(keys([o.config for o in history]))


def test_unknown_strategy_is_invalid_input() -> None:
    from kernelfarm.core.errors import InvalidInput

    with pytest.raises(InvalidInput):
        get_strategy("nope")


def test_every_strategy_subclasses_the_contract() -> None:
    for name, cls in STRATEGIES.items():
        assert issubclass(cls, Optimizer) and cls.name == name


def test_bayes_learns_to_avoid_failing_configs() -> None:
    """Failures teach the model: after its initial design the BO fails far less often than the
    failing share of the space (~40 % here, with the optimum on the failure boundary)."""
    valid = SPACE.valid_configs(CONTEXT)
    rate = sum(objective(c) is None for c in valid) / len(valid)
    late_rates = []
    for seed in range(3):
        history = drive(get_strategy("bayes"), SPACE, CONTEXT, steps=10, batch=4, seed=seed, options={"n_init": 8})
        late_rates.append(np.mean([o.value is None for o in history[16:]]))
    assert rate > 0.3
    assert np.mean(late_rates) < 0.6 * rate


def test_bayes_rejects_unknown_or_malformed_options() -> None:
    from kernelfarm.core.errors import InvalidInput

    malformed: list[dict[str, object]] = [
        {"n_inti": 3},
        {"n_init": "3"},
        {"failures": "pray"},
        {"xi": True},
        {"pool": 0},
    ]
    malformed += [{"prior_consensus": v} for v in (math.nan, -0.1, 1.5, "0.1", True)]
    for bad in malformed:
        with pytest.raises(InvalidInput):
            get_strategy("bayes").from_history(SPACE, CONTEXT, [], 0, bad)
    assert get_strategy("bayes").from_history(SPACE, CONTEXT, [], 0, {"xi": 0, "n_init": 3}).ask(1)


@pytest.mark.parametrize("name", ALL)
def test_large_spaces_stay_fast(name: str) -> None:
    """~150k valid configs: set operations over the whole space once cost ~1 s per ask."""
    import time

    space = SearchSpace.from_dict(
        {
            "parameters": {
                "a": [2**i for i in range(11)],
                "b": [2**i for i in range(11)],
                "c": list(range(1, 33)),
                "d": list(range(1, 33)),
                "e": [0, 1, 2, 3],
            },
            "constraints": ["a * b <= 1024", "c * d <= 256"],
        }
    )
    valid = space.valid_configs()
    history = [Observation(c, float(c["c"]) + float(c["e"])) for c in valid[:: len(valid) // 60]]
    get_strategy(name).from_history(space, {}, history, 0, options(name)).ask(1)  # candidate table
    start = time.perf_counter()
    configs = get_strategy(name).from_history(space, {}, history, 1, options(name)).ask(8)
    assert len(configs) == 8 and time.perf_counter() - start < 2.0
