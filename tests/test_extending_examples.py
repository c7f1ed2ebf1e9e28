"""The worked examples of docs/EXTENDING.md (docs/examples/) keep the contracts the page says they keep.

Each example is registered for one test (the registry's dict, patched back afterwards) and each
per-implementation test of its axis's contract suite is called with the example's name, exactly as the
suite calls it for the shipped strategies and kernels. The GPU check of the kernel runs on the GPU
machine only (docs/EXTENDING.md says how).
"""

from __future__ import annotations

import importlib.util
import inspect
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from kernelfarm.kernels.registry import all_kernels
from kernelfarm.tuner.strategies.registry import STRATEGIES
from tests.kernels import test_kernel_contract as kernel_contract
from tests.tuner import test_strategy_contract as strategy_contract

EXAMPLES = Path(__file__).resolve().parent.parent / "docs" / "examples"
CALLABLE_WITH = {"name", "tmp_path"}  # the arguments a per-implementation contract test takes


def load(path: Path, module_name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(module_name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def per_implementation_tests(suite: ModuleType, *names: list[str]) -> list[Callable[..., None]]:
    """The suite's tests parametrized over one of the lists ``names`` (those that would hold the example:
    every strategy; every kernel, every CUDA kernel), taking a name and maybe a tmp_path, off the GPU."""
    found: list[Callable[..., None]] = []
    for attribute, function in vars(suite).items():
        if not attribute.startswith("test_") or not inspect.isfunction(function):
            continue
        marks = getattr(function, "pytestmark", [])
        over = [mark.args[1] for mark in marks if mark.name == "parametrize" and mark.args[0] == "name"]
        gpu = any(mark.name == "gpu" for mark in marks)
        takes = set(inspect.signature(function).parameters)
        if over and any(over[0] is listed for listed in names) and takes <= CALLABLE_WITH and not gpu:
            found.append(function)
    return found


def call(test: Callable[..., None], name: str, tmp_path: Path) -> None:
    arguments: dict[str, Any] = {"name": name}
    if "tmp_path" in inspect.signature(test).parameters:
        arguments["tmp_path"] = tmp_path
    test(**arguments)


STRATEGY_TESTS = per_implementation_tests(strategy_contract, strategy_contract.ALL)
# The axpy example has a CUDA implementation only: the replay tests are not about it.
KERNEL_TESTS = per_implementation_tests(kernel_contract, kernel_contract.KERNELS, kernel_contract.CUDA_KERNELS)


def test_the_suites_offer_their_contract_tests() -> None:
    # Guard against a refactor that renames the parameter: then nothing below would run.
    assert len(STRATEGY_TESTS) >= 8 and len(KERNEL_TESTS) >= 10


@pytest.mark.parametrize("test", STRATEGY_TESTS, ids=lambda test: test.__name__)
def test_the_local_search_example_keeps_the_strategy_contract(
    test: Callable[..., None], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    example = load(EXAMPLES / "local_search.py", "example_local_search")
    monkeypatch.setitem(STRATEGIES, example.LocalSearch.name, example.LocalSearch)
    call(test, example.LocalSearch.name, tmp_path)


@pytest.mark.parametrize("test", KERNEL_TESTS, ids=lambda test: test.__name__)
def test_the_axpy_example_keeps_the_kernel_contract(
    test: Callable[..., None], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    example = load(EXAMPLES / "axpy" / "spec.py", "example_axpy")
    monkeypatch.setitem(all_kernels(), example.SPEC.name, example.SPEC)
    call(test, example.SPEC.name, tmp_path)
