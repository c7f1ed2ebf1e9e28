"""A space's values as config keys see them. A job's restriction names values of the kernel's own
parameters by type as well as by equality (``16.0 == 16`` and ``True == 1`` in Python, but a config
holding 16.0 has another key); a parameter's values differ as text, since the key is their text."""

from __future__ import annotations

import pytest

from kernelfarm.core.errors import InvalidInput
from kernelfarm.core.space import Parameter, SearchSpace

SPACE = SearchSpace(
    parameters=(Parameter("block", (16, 32, 64)), Parameter("scale", (0.5, 2.0)), Parameter("flag", (0, 1)))
)


@pytest.mark.parametrize(
    ("values", "shown"), [({"block": [16.0]}, "[16.0]"), ({"flag": [True]}, "[True]"), ({"block": ["16"]}, "['16']")]
)
def test_a_value_of_another_type_is_refused_naming_it(values: dict, shown: str) -> None:
    with pytest.raises(InvalidInput, match=rf"values {shown.replace('[', '.').replace(']', '.')} are not in"):
        SPACE.restrict(values)


def test_an_integer_names_an_equal_float_as_the_space_holds_it() -> None:
    restricted = SPACE.restrict({"scale": [2]})
    (value,) = restricted.parameters[1].values
    assert value == 2.0 and isinstance(value, float)
    assert restricted.key({"block": 16, "scale": value, "flag": 0}) == SPACE.key({"block": 16, "scale": 2.0, "flag": 0})


def test_a_value_given_twice_is_kept_once() -> None:
    assert SPACE.restrict({"block": [32, 16, 32]}).parameters[0].values == (32, 16)


@pytest.mark.parametrize(
    ("values", "reason"),
    [(("1", 1), "differ as text"), (("1,2", "3"), "no comma"), ((float("nan"), 1.0), "finite"),
     ((float("inf"),), "finite")],
)  # fmt: skip
def test_a_parameter_whose_values_a_config_key_cannot_tell_apart_is_refused(values: tuple, reason: str) -> None:
    """Any kernel's space (catalogue, plugin, upload): a job stores each config key once, and a clash hung it."""
    with pytest.raises(InvalidInput, match=reason):
        Parameter("p", values)
