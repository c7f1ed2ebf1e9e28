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
    # Eager calls the launch directly (the dispatcher would add host time to every call of a launch-bound
    # model); while torch.compile traces, the same launch goes through the custom operator.
    with torch.profiler.profile() as prof, torch.inference_mode():
        out = model(x)
    assert "kernelfarm::tuned_matmul" not in {event.key for event in prof.key_averages()}
    with monkeypatch.context() as tracing, torch.profiler.profile() as prof, torch.inference_mode():
        tracing.setattr(torch.compiler, "is_compiling", lambda: True)
        traced = model(x)
    assert "kernelfarm::tuned_matmul" in {event.key for event in prof.key_averages()}
    torch.testing.assert_close(traced, out)
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


def _fused(a: Any, b: Any, bias: Any, b_nk: bool, gelu: str, config: list[int]) -> Any:
    """The fused kernel's arithmetic on the CPU: fp32 inside, rounded once to the inputs' dtype."""
    z = a.float() @ (b.T if b_nk else b).float() + bias.float()
    return torch.nn.functional.gelu(z, approximate="tanh" if gelu == "tanh" else "none").to(a.dtype)


def test_a_fused_mlp_is_swapped_in_checked_against_float32_and_timed_by_turns(monkeypatch: pytest.MonkeyPatch) -> None:
    from kernelfarm.model_profiler.fusion import fused_mlp_candidates
    from kernelfarm.model_profiler.models import build

    launches: list[tuple[str, bool]] = []

    def counting(a: Any, b: Any, bias: Any, b_nk: bool, gelu: str, config: list[int]) -> Any:
        launches.append((gelu, b_nk))
        return _fused(a, b, bias, b_nk, gelu, config)

    monkeypatch.setattr(swap, "_launch_fused", counting)
    monkeypatch.setattr(swap, "_launch", lambda *args: pytest.fail("the plain product of a fused c_fc ran"))
    mut = build("gpt2-tiny", dtype="bfloat16", batch=2, seq=16, device="cpu")
    (candidate,) = fused_mlp_candidates(mut)
    problem = candidate["problem"]
    gemm = {k: v for k, v in problem.items() if k != "gelu"}
    entries = [
        # the same c_fc's plain product, tuned too (before the fused kernel was): the fused one takes it
        {"operator": "aten::addmm", "kernel": "matmul_triton", "config": CONFIG, "speedup": 3.0, "problem": gemm,
         "kernel_problem": gemm},
        {"operator": "c_fc + act", "kernel": "matmul_bias_gelu_triton", "config": CONFIG, "speedup": 2.0,
         "problem": problem, "kernel_problem": problem, "modules": candidate["modules"], "calls": 2},
    ]  # fmt: skip
    result = swap.swap_and_measure(mut, entries, baseline_ms=1.0, iterations=2)

    fused_names = [f"transformer.h.{i}.mlp.{child}" for i in (0, 1) for child in ("c_fc", "act")]
    assert result["swapped"] == {f"c_fc + act {problem}": fused_names, f"aten::addmm {gemm}": []}
    # checked against a float32 copy: eager's error is the bf16 model's own; the swapped one's is near it
    assert result["reference"] == "a float32 copy of the model" and result["outputs_match"], result
    assert result["eager_rel_l2_vs_float32"] > 0
    assert 0 < result["swapped_rel_l2_vs_float32"] <= result["rel_l2_tolerance"]
    assert result["rel_l2_tolerance"] == max(swap.REL_L2_TOLERANCE, 1.5 * result["eager_rel_l2_vs_float32"])
    assert next(mut.model.parameters()).dtype == torch.bfloat16  # the model itself was not converted
    # one launch per MLP per inference, with GPT-2's tanh GELU and the Conv1D's K x N weight, in the output
    # check and the swapped blocks only (per block 3 warm-up and 2 timed inferences)
    assert set(launches) == {("tanh", False)}
    assert len(launches) == 2 * (1 + result["rounds"] * (3 + 2))
    # swapped (the A/B ends on the swapped model): act is the identity, and no GELU op runs; while
    # torch.compile traces, the fused launch goes through its custom operator
    with monkeypatch.context() as tracing, torch.profiler.profile() as prof, torch.inference_mode():
        tracing.setattr(torch.compiler, "is_compiling", lambda: True)
        mut.model(**mut.inputs)
    ops = {event.key for event in prof.key_averages()}
    assert "kernelfarm::tuned_matmul_bias_gelu" in ops and "aten::tanh" not in ops
    x = torch.randn(3, 64, dtype=torch.bfloat16)
    assert torch.equal(mut.model.transformer.h[0].mlp.act(x), x)
    # another batch size than the one tuned: the modules' own c_fc and GELU, as eager
    one = {"input_ids": mut.inputs["input_ids"][:1]}
    with torch.inference_mode():
        swapped_one = mut.model(**one).logits
        swap._set_swapped(mut.model, {n: None for n in fused_names}, on=False)
        eager_one = mut.model(**one).logits
    torch.testing.assert_close(swapped_one, eager_one, rtol=0, atol=0)


def test_the_output_check_allows_the_eager_models_own_error_and_no_more() -> None:
    exact = torch.linspace(-10, 10, 1000)
    noise = torch.sin(torch.arange(1000.0))  # |noise| <= 1, rel L2 of 0.1 * noise about 1.2e-2
    eager = exact + 0.1 * noise
    eager_rel = float((eager - exact).norm() / exact.norm())
    eager_max = float((eager - exact).abs().max())
    assert eager_rel > swap.REL_L2_TOLERANCE  # the case the float32 reference is for
    within = swap.output_check(eager, exact + 0.14 * noise, exact, float32_copy=True)
    assert within["outputs_match"] and within["rel_l2_tolerance"] == pytest.approx(1.5 * eager_rel)
    assert within["max_abs_tolerance"] == pytest.approx(max(0.05 * 10, 1.5 * eager_max))
    assert not swap.output_check(eager, exact + 0.16 * noise, exact, float32_copy=True)["outputs_match"]
    # one element far off fails, whatever the norm
    spike = exact + 0.01 * noise
    spike[3] += 0.6
    check = swap.output_check(exact + 0.01 * noise, spike, exact, float32_copy=True)
    assert check["swapped_rel_l2_vs_float32"] < check["rel_l2_tolerance"] and not check["outputs_match"]
    # an exact eager model (float32: the reference is eager itself) leaves the fixed tolerances
    same = swap.output_check(exact, exact + 0.05 * noise, exact, float32_copy=False)
    assert same["reference"] == "eager (the model is float32)" and same["rel_l2_tolerance"] == swap.REL_L2_TOLERANCE
    assert same["outputs_match"]


def test_the_float32_reference_is_a_float32_copy_of_the_same_model() -> None:
    from kernelfarm.model_profiler.models import build

    mut = build("gpt2-tiny", dtype="bfloat16", batch=1, seq=8, device="cpu")
    logits = swap.float32_logits(mut)
    assert logits.dtype == torch.float32 and next(mut.model.parameters()).dtype == torch.bfloat16
    reference = mut.model.float()  # the same weights, made float32 here by hand
    with torch.inference_mode():
        expected = reference(**mut.inputs).logits
    torch.testing.assert_close(logits, expected, rtol=0, atol=0)


def positional_model(dtype: Any, batch: int, seq: int, device: str) -> tuple[Any, tuple[Any, ...]]:
    """A user's ``module:function`` model called with positional inputs (profile-model wraps it)."""
    model = torch.nn.Sequential(torch.nn.Linear(32, 40), torch.nn.ReLU(), torch.nn.Linear(40, 8))
    return model.to(device, dtype), (torch.randn(batch, seq, 32, device=device, dtype=dtype),)


def test_a_user_model_with_positional_inputs_is_swapped(monkeypatch: pytest.MonkeyPatch) -> None:
    from kernelfarm.model_profiler import models

    monkeypatch.setattr(swap, "_launch", _matmul)
    mut = models.build(f"{__name__}:positional_model", dtype="float32", batch=2, seq=4, device="cpu")
    entry = {"operator": "aten::addmm", "kernel": "matmul_triton", "config": CONFIG, "speedup": 2.0,
             "problem": {"M": 8, "N": 40, "K": 32, "b_layout": "nk"},
             "kernel_problem": {"M": 8, "N": 40, "K": 32, "dtype": "float32", "b_layout": "nk"}}  # fmt: skip
    result = swap.swap_and_measure(mut, [entry], baseline_ms=1.0, iterations=2)
    assert list(result["swapped"].values()) == [["0"]]
    assert result["outputs_match"], result
