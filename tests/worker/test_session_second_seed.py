"""The measuring session's verification steps on the CPU: the GPU is faked by NumPy arrays behind
CuPy's names (the session only allocates, launches through the loader and synchronizes), the kernel
by a loader whose "launch" is a Python function. Timing is not under test here (stubbed).

A config wrong only on some inputs passes its job's input set and is caught on the second one; a
correct config is re-verified only while it is the fastest its child has timed."""

from __future__ import annotations

import sys
import types
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import numpy as np
import pytest

from kernelfarm.kernels.tolerance import Tolerance
from kernelfarm.worker.measuring.catalogue import KernelCatalogue
from kernelfarm.worker.measuring.loader import KernelLoader, LoadedKernel


@pytest.fixture
def session_module(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    fake = types.ModuleType("cupy")
    fake.__dict__.update({k: getattr(np, k) for k in dir(np) if not k.startswith("__")})
    device = types.SimpleNamespace(id=0, attributes={"L2CacheSize": 1 << 20}, use=lambda: None)
    fake.cuda = types.SimpleNamespace(  # type: ignore[attr-defined]
        Device=lambda *_: device, Stream=types.SimpleNamespace(null=types.SimpleNamespace(synchronize=lambda: None))
    )
    fake.get_default_memory_pool = lambda: types.SimpleNamespace(free_all_blocks=lambda: None)  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "cupy", fake)
    from kernelfarm.worker.measuring import session

    monkeypatch.setattr(session, "time_kernel", _timed([1.0] * 100))
    monkeypatch.setattr(session, "L2Flusher", lambda size: lambda: None)
    yield session


def _timed(values: list[float]) -> Callable[..., Any]:
    remaining = iter(values)
    return lambda run, policy, flush: types.SimpleNamespace(times_ms=(next(remaining),) * 3)


class Copy:
    """y = x; inputs in [0.5, 1.5), so x[0] > 1 for about half the seeds."""

    def make_inputs(self, problem: Mapping[str, Any], seed: int) -> dict[str, Any]:
        x = np.random.default_rng(seed).random(int(problem["n"])).astype(np.float32) + 0.5
        return {"x": x, "y": np.empty_like(x)}

    def outputs(self) -> tuple[str, ...]:
        return ("y",)

    def reference(self, buffers: Mapping[str, Any], problem: Mapping[str, Any]) -> dict[str, Any]:
        return {"y": buffers["x"].copy()}

    def tolerance(self, problem: Mapping[str, Any]) -> Tolerance:
        return Tolerance.derived(1e-6, "float32", 1)


class Loader(KernelLoader):
    def __init__(self, wrong_when_first_above_one: bool) -> None:
        self.wrong = wrong_when_first_above_one
        self.launches = 0

    def implementation(self, spec: Any) -> Copy:
        return Copy()

    def load(self, artifact: str, spec: Any, config: Mapping[str, Any], problem: Mapping[str, Any]) -> LoadedKernel:
        loader = self

        class Loaded(LoadedKernel):
            resources: Mapping[str, int] = {}

            def bind(self, buffers: Mapping[str, Any], problem: Mapping[str, Any]) -> Callable[[], None]:
                def run() -> None:
                    loader.launches += 1
                    x = buffers["x"]
                    buffers["y"][:] = x + 1 if loader.wrong and x[0] > 1 else x

                return run

        return Loaded()


class Catalogue(KernelCatalogue):
    def spec(self, name: str, version: int | None = None, bundle: str | None = None) -> Any:
        return types.SimpleNamespace(name=name)


def measure(session: Any, loader: Loader, seed: int) -> dict[str, Any]:
    s = session.Session(loader)
    s.catalogue = Catalogue()
    return s.measure({"kernel": "copy", "problem": {"n": 1000}, "config": {}, "seed": seed, "artifact": "",
                      "policy": {}})  # fmt: skip


def first_above_one(seed: int) -> bool:
    return bool(Copy().make_inputs({"n": 1000}, seed)["x"][0] > 1)


def test_a_config_wrong_on_some_inputs_fails_on_the_second_input_set(session_module: Any) -> None:
    second = session_module.second_seed
    seeds = [s for s in range(200) if not first_above_one(s) and first_above_one(second(s))]
    assert seeds  # the job's inputs cannot show the fault, the second set can
    reply = measure(session_module, Loader(wrong_when_first_above_one=True), seeds[0])
    assert reply["status"] == "failure" and reply["kind"] == "wrong_result"
    assert "failed on the second input seed" in reply["message"]
    assert reply["rel_error"] == 0.0 and reply["second_seed_element_error"] > 0.1


def test_only_a_new_fastest_config_is_checked_again(session_module: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    loader = Loader(wrong_when_first_above_one=False)
    s = session_module.Session(loader)
    s.catalogue = Catalogue()
    monkeypatch.setattr(session_module, "time_kernel", _timed([2.0, 3.0, 1.0]))
    replies = [
        s.measure({"kernel": "copy", "problem": {"n": 1000}, "config": {}, "seed": 5, "artifact": "", "policy": {}})
        for _ in range(3)
    ]
    assert all(r["status"] == "ok" for r in replies)
    # 2.0 ms: first, checked again; 3.0 ms: slower, not; 1.0 ms: a new fastest, checked again.
    assert ["second_seed" in r for r in replies] == [True, False, True]
    assert loader.launches == 5


class OutOfMemoryError(MemoryError):
    """What CuPy's pool raises when the device has no memory left (cupy.cuda.memory.OutOfMemoryError)."""


class TooLarge(Copy):
    """A problem with n above ``limit`` does not fit: making its inputs raises as CuPy's pool does."""

    limit = 10_000

    def make_inputs(self, problem: Mapping[str, Any], seed: int) -> dict[str, Any]:
        if int(problem["n"]) > self.limit:
            raise OutOfMemoryError(
                f"Out of memory allocating {4 * int(problem['n']):,} bytes (allocated so far: 0 bytes)."
            )
        return super().make_inputs(problem, seed)


def test_a_problem_that_does_not_fit_in_device_memory_is_a_constraint_failure_and_the_child_goes_on(
    session_module: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    import cupy  # the fixture's stand-in

    freed: list[bool] = []
    monkeypatch.setattr(cupy, "get_default_memory_pool", lambda: types.SimpleNamespace(
        free_all_blocks=lambda: freed.append(True)))  # fmt: skip
    monkeypatch.setattr(cupy.cuda, "runtime", types.SimpleNamespace(memGetInfo=lambda: (3 << 30, 80 << 30)),
                        raising=False)  # fmt: skip
    loader = Loader(wrong_when_first_above_one=False)
    monkeypatch.setattr(loader, "implementation", lambda spec: TooLarge())
    s = session_module.Session(loader)
    s.catalogue = Catalogue()

    def measure_n(n: int) -> dict[str, Any]:
        return s.measure({"kernel": "copy", "problem": {"n": n}, "config": {}, "seed": 3, "artifact": "",
                          "policy": {}})  # fmt: skip

    reply = measure_n(1 << 40)
    assert reply["status"] == "failure" and reply["kind"] == "constraint"
    assert "out of device memory" in reply["message"] and "3.0 GiB free of 80.0 GiB" in reply["message"]
    assert "OutOfMemoryError" in reply["message"]
    assert freed  # what it held went back to the driver
    assert measure_n(1000)["status"] == "ok"  # the same child measures the next problem
