"""Which constraints leave a space empty on their own, and whether by dividing by zero: what the
"empty search space" refusal of a job names (the submitter otherwise had to guess which of the
kernel's constraints and their own it was)."""

from __future__ import annotations

from kernelfarm.core.space import Parameter, SearchSpace

PARAMETERS = (Parameter("block", (16, 32, 64)), Parameter("tile", (1, 2, 4)))


def test_a_constraint_that_divides_by_zero_everywhere_is_named_as_such() -> None:
    space = SearchSpace(parameters=PARAMETERS, constraints=("block % (tile - tile) == 0", "block >= 16"))
    assert len(space.valid_indices()) == 0
    assert space.constraints_leaving_nothing() == [("block % (tile - tile) == 0", True)]


def test_a_constraint_that_divides_by_zero_somewhere_only_is_not() -> None:
    # tile - 1 is zero for tile 1 only: the other configs are what the constraint refuses
    space = SearchSpace(parameters=PARAMETERS, constraints=("block % (tile - 1) == 99",))
    assert space.constraints_leaving_nothing() == [("block % (tile - 1) == 99", False)]


def test_a_problem_value_can_be_what_leaves_nothing() -> None:
    space = SearchSpace(parameters=PARAMETERS, constraints=("size % block == 0",), context_names=frozenset({"size"}))
    assert space.constraints_leaving_nothing({"size": 40}) == [("size % block == 0", False)]
    assert space.constraints_leaving_nothing({"size": 64}) == []


def test_constraints_that_only_together_leave_nothing_are_not_named() -> None:
    space = SearchSpace(parameters=PARAMETERS, constraints=("block > 16", "block < 32"))
    assert len(space.valid_indices()) == 0
    assert space.constraints_leaving_nothing() == []


def test_an_allow_list_is_judged_on_its_own_configs() -> None:
    # the recorded configs hold block 16 alone: 'block > 16' holds for none of them
    space = SearchSpace(parameters=PARAMETERS, constraints=("block > 16",), allowed_keys=frozenset({"16,1", "16,2"}))
    assert len(space.valid_indices()) == 0
    assert space.constraints_leaving_nothing() == [("block > 16", False)]
