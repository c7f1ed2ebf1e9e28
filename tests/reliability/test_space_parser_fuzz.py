"""Hypothesis against the search-space parser (core/constraints.py, core/space.py).

Distinct from any parser tests in tests/tuner/: these check containment (no input makes the parser
or the enumeration raise anything but InvalidInput, which the API maps to 422) and a differential
oracle (the vectorised interpreter agrees with Python's own arithmetic, config by config)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from kernelfarm.core.errors import InvalidInput
from kernelfarm.kernels.registry import get_kernel

SPEC = get_kernel("cn_pnpoly")
SPACE = SPEC.space
PROBLEM = dict(SPEC.default_problem)
NAMES = [p.name for p in SPACE.parameters]
FAST = settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def expressions(allow_pow: bool) -> st.SearchStrategy[str]:
    leaves = st.one_of(st.sampled_from(NAMES), st.integers(-5, 40).map(str))
    ops = ["+", "-", "*", "//", "%", "/"] + (["**"] if allow_pow else [])

    def extend(children: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
        binary = st.tuples(children, st.sampled_from(ops), children).map(lambda t: f"({t[0]} {t[1]} {t[2]})")
        calls = st.tuples(st.sampled_from(["min", "max"]), children, children).map(lambda t: f"{t[0]}({t[1]}, {t[2]})")
        return st.one_of(binary, calls, children.map(lambda c: f"abs({c})"), children.map(lambda c: f"-{c}"))

    return st.recursive(leaves, extend, max_leaves=6)


def conditions(allow_pow: bool) -> st.SearchStrategy[str]:
    cmp = st.tuples(expressions(allow_pow), st.sampled_from(["<", "<=", ">", ">=", "==", "!="]),
                    expressions(allow_pow)).map(" ".join)  # fmt: skip
    return st.recursive(cmp, lambda c: st.one_of(
        st.tuples(c, st.sampled_from(["and", "or"]), c).map(lambda t: f"({t[0]} {t[1]} {t[2]})"),
        c.map(lambda x: f"not ({x})")), max_leaves=3)  # fmt: skip


def enumerate_or_refuse(constraint: str) -> Any:
    try:
        return SPACE.restrict(None, [constraint]).valid_indices(PROBLEM)
    except InvalidInput:
        return None  # refused with a reason: the API answers 422


@FAST
@given(st.text(max_size=200))
def test_any_text_is_refused_cleanly_or_accepted(text: str) -> None:
    enumerate_or_refuse(text)  # anything but InvalidInput propagates and fails the test


@FAST
@given(conditions(allow_pow=True))
def test_generated_constraints_never_crash(constraint: str) -> None:
    result = enumerate_or_refuse(constraint)
    assert result is None or result.shape[1] == len(NAMES)


def python_truth(constraint: str, config: dict[str, Any]) -> bool | None:
    try:
        # Oracle only: the text comes from the grammar above (names, small ints, arithmetic), never a user.
        return bool(eval(constraint, {"__builtins__": {}, "min": min, "max": max, "abs": abs}, dict(config)))
    except ZeroDivisionError:
        return None


@FAST
@given(conditions(allow_pow=False))
def test_vectorised_interpreter_agrees_with_python(constraint: str) -> None:
    result = enumerate_or_refuse(constraint)
    assume(result is not None)
    kept = {SPACE.key(SPACE.config_at(row)) for row in result}
    for row in SPACE.valid_indices(PROBLEM)[:300]:
        config = SPACE.config_at(row)
        truth = python_truth(constraint, config)
        # a division by zero that Python reaches makes the config invalid
        assert (SPACE.key(config) in kept) == bool(truth), (constraint, config)
        assert SPACE.restrict(None, [constraint]).contains(config, PROBLEM) == bool(truth), (constraint, config)


# Each would write MARKER if the parser ran it as Python: it must be refused, and MARKER must stay unwritten.
CODE_INJECTIONS = [
    "__import__('os').system('touch MARKER')",
    "open('MARKER', 'w').write('x')",
    "__import__('pathlib').Path('MARKER').touch()",
    "[c for c in ().__class__.__base__.__subclasses__()] and open('MARKER', 'w')",
    "(lambda: open('MARKER', 'w'))()",
    "block_size_x.__class__.__init__.__globals__['os'].system('touch MARKER')",
    "exec(\"open('MARKER', 'w')\")",
    "eval(\"open('MARKER', 'w')\")",
]


@pytest.mark.parametrize("template", CODE_INJECTIONS)
def test_hostile_constraints_are_refused(template: str, tmp_path: Path) -> None:
    marker = tmp_path / "marker"
    constraint = template.replace("MARKER", str(marker))
    with pytest.raises(InvalidInput):
        SPACE.restrict(None, [constraint]).valid_indices(PROBLEM)
    assert not marker.exists()


@pytest.mark.parametrize(
    "constraint",
    [
        "[1] * 10 ** 9",
        "10 ** 10 ** 10 > 1",
        "tile_size " * 300,
        "(" * 200 + "1" + ")" * 200,
        "block_size_x if 1 else 2",
    ],
)
def test_heavy_constraints_are_refused_or_bounded(constraint: str) -> None:
    """Refused with a reason, or enumerated quickly to a subset of the unconstrained space."""
    start = time.monotonic()
    result = enumerate_or_refuse(constraint)
    assert time.monotonic() - start < 10
    if result is not None:
        assert result.shape[1] == len(NAMES)
        assert len(result) <= len(SPACE.valid_indices(PROBLEM))


@FAST
@given(st.dictionaries(st.sampled_from([*NAMES, "nope"]), st.lists(st.integers(-10, 2000), max_size=5), max_size=4))
def test_parameter_overrides_are_refused_cleanly(values: dict[str, list[int]]) -> None:
    try:
        restricted = SPACE.restrict(values, [])
        restricted.valid_indices(PROBLEM)
    except InvalidInput:
        return
    assert set(values) <= set(NAMES)
    for name, chosen in values.items():
        assert set(chosen) <= set(next(p.values for p in SPACE.parameters if p.name == name))
