"""The swap's module surgery on the CPU: which modules are replaced, the padded weight, the custom operator
in the model's graph and the output check. Only the GPU kernel launch is stood in for (by a plain matmul:
the Triton kernel needs a GPU; tests/gpu/test_model_swap.py runs the real one)."""

from __future__ import annotations

from typing import Any

import pytest

torch = pytest.importorskip("torch", reason="the model profiler's CPU tests need the `profile` extra (torch)")
pytest.importorskip("transformers", reason="the swap recognises transformers' Conv1D (the `profile` extra)")

from transformers.pytorch_utils import Conv1D  # noqa: E402

from kernelfarm.model_profiler import swap  # noqa: E402
from kernelfarm.model_profiler.models import ModelUnderTest  # noqa: E402

CONFIG = {"BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 32, "GROUP_M": 8, "num_warps": 4, "num_stages": 2, "TMA": 1,
          "SUBTILE": 1}  # fmt: skip


def _matmul(a: Any, b: Any, b_nk: bool, config: list[int]) -> Any:
    return a @ (b.T if b_nk else b)


def test_linear_and_conv1d_are_swapped_with_a_padded_weight(monkeypatch: pytest.MonkeyPatch) -> None:
    launches: list[int] = []

    def counting(a: Any, b: Any, b_nk: bool, config: list[int]) -> Any:
        launches.append(1)
        return _matmul(a, b, b_nk, config)

    monkeypatch.setattr(swap, "_launch", counting)
    torch.manual_seed(0)
    model = torch.nn.Sequential(Conv1D(48, 32), torch.nn.GELU(), torch.nn.Linear(48, 37), torch.nn.Linear(37, 5)).eval()
    x = torch.randn(2, 8, 32)
    with torch.inference_mode():
        reference = model(x)
    entries = [
        {"operator": "aten::addmm", "kernel": "matmul_triton", "config": CONFIG, "speedup": 2.0,
         "problem": {"M": 16, "N": 48, "K": 32, "b_layout": "kn"},
         "kernel_problem": {"M": 16, "N": 48, "K": 32, "dtype": "float32", "b_layout": "kn"}},
        {"operator": "aten::addmm", "kernel": "matmul_triton", "config": CONFIG, "speedup": 2.0,
         "problem": {"M": 16, "N": 37, "K": 48, "b_layout": "nk"},
         "kernel_problem": {"M": 16, "N": 40, "K": 48, "dtype": "float32", "b_layout": "nk"}},
        # slower than its baseline: left alone
        {"operator": "aten::addmm", "kernel": "matmul_triton", "config": CONFIG, "speedup": 0.9,
         "problem": {"M": 16, "N": 5, "K": 37, "b_layout": "nk"},
         "kernel_problem": {"M": 16, "N": 8, "K": 37, "dtype": "float32", "b_layout": "nk"}},
    ]  # fmt: skip
    mut = ModelUnderTest("test", model, {"input": x}, "float32", "cpu")
    result = swap.swap_and_measure(mut, entries, baseline_ms=1.0, iterations=2)

    assert list(result["swapped"].values()) == [["0"], ["2"]]
    assert result["outputs_match"] and result["rel_l2_error"] < 1e-5, result
    # baseline and swapped model timed by turns: the tuned kernel ran in the swapped blocks only (two swapped
    # modules; per block 3 warm-up and 2 timed inferences) and in the one output check
    rounds = result["rounds"]
    assert len(result["baseline_runs_ms"]) == len(result["swapped_runs_ms"]) == 2 * rounds
    assert len(launches) == 2 * (1 + rounds * (3 + 2))
    with torch.profiler.profile() as prof, torch.inference_mode():
        out = model(x)
    ops = {event.key for event in prof.key_averages()}
    assert "kernelfarm::tuned_matmul" in ops
    assert out.shape == reference.shape == (2, 8, 5)
    torch.testing.assert_close(out, reference, rtol=1e-5, atol=1e-5)
    # another batch size than the one tuned falls back to the module's own forward
    with torch.inference_mode():
        torch.testing.assert_close(model(x[:1]), reference[:1], rtol=1e-5, atol=1e-5)


def test_padded_weight_appends_zero_outputs() -> None:
    w = torch.randn(37, 48)
    padded = swap.padded_weight(w, 37, 40, b_nk=True)
    assert padded.shape == (40, 48) and torch.equal(padded[:37], w) and not padded[37:].any()
    w_kn = torch.randn(48, 37)
    padded = swap.padded_weight(w_kn, 37, 40, b_nk=False)
    assert padded.shape == (48, 40) and torch.equal(padded[:, :37], w_kn) and not padded[:, 37:].any()
    assert swap.padded_weight(w, 37, 37, b_nk=True) is w
