"""Which MLPs the fused matmul + bias + GELU kernel can run (model_profiler/fusion.py), on real transformers
models on the CPU: the detection rule, the exact problem (tokens from the inference, layout from the weight,
GELU form from the activation's type) and the baseline; and the report's lines for a fused entry."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("torch", reason="the model profiler's CPU tests need the `profile` extra (torch)")
pytest.importorskip("transformers", reason="the built-in models need the `profile` extra")

import torch
import transformers
from transformers.activations import (
    FastGELUActivation,
    GELUActivation,
    GELUTanh,
    NewGELUActivation,
    QuickGELUActivation,
)
from transformers.pytorch_utils import Conv1D

from kernelfarm.model_profiler.analysis import analyse
from kernelfarm.model_profiler.capture import capture
from kernelfarm.model_profiler.fusion import find_mlps, fused_mlp_candidates, gelu_form
from kernelfarm.model_profiler.mapping import family_problem
from kernelfarm.model_profiler.models import ModelUnderTest, build
from kernelfarm.model_profiler.report import write_markdown
from kernelfarm.model_profiler.tuning import FUSED_AWAY
from kernelfarm.worker.measuring.roofline import Ceilings

BATCH, SEQ = 2, 32


class OwnGELU(NewGELUActivation):
    """A subclass may compute something else: not taken for the tanh GELU."""


@pytest.mark.parametrize(
    ("act", "form"),
    [
        (NewGELUActivation(), "tanh"),
        (GELUTanh(), "tanh"),
        (GELUActivation(), "erf"),
        (GELUActivation(use_gelu_python=True), "erf"),
        (torch.nn.GELU(), "erf"),
        (torch.nn.GELU(approximate="tanh"), "tanh"),
        (FastGELUActivation(), None),
        (QuickGELUActivation(), None),
        (torch.nn.ReLU(), None),
        (OwnGELU(), None),
    ],
)
def test_the_gelu_form_comes_from_the_activations_exact_type(act: Any, form: str | None) -> None:
    assert gelu_form(act) == form
    if form is not None:  # and the form named is the function the module computes
        x = torch.linspace(-6, 6, 101, dtype=torch.float64)
        torch.testing.assert_close(act(x), torch.nn.functional.gelu(x, approximate="none" if form == "erf" else form))


class Mlp(torch.nn.Module):
    def __init__(self, c_fc: Any, act: Any) -> None:
        super().__init__()
        self.c_fc, self.act, self.c_proj = c_fc, act, torch.nn.Linear(48, 16)

    def forward(self, x: Any) -> Any:
        return self.c_proj(self.act(self.c_fc(x)))


class OwnLinear(torch.nn.Linear):
    pass


def test_mlps_of_the_gpt2_form_are_found_by_their_children() -> None:
    model = torch.nn.ModuleDict({
        "linear": Mlp(torch.nn.Linear(16, 48), torch.nn.GELU()),
        "conv1d": Mlp(Conv1D(48, 16), NewGELUActivation()),
        "relu": Mlp(torch.nn.Linear(16, 48), torch.nn.ReLU()),  # no GELU: not fused
        "own_linear": Mlp(OwnLinear(16, 48), torch.nn.GELU()),  # not exactly a Linear: not fused
    })  # fmt: skip
    found = {m.name: (m.n, m.k, m.b_layout, m.gelu) for m in find_mlps(model)}
    assert found == {"linear": (48, 16, "nk", "erf"), "conv1d": (48, 16, "kn", "tanh")}


@pytest.mark.parametrize(("activation", "form"), [("gelu_new", "tanh"), ("gelu", "erf"), ("gelu_fast", None)])
def test_gpt2_tiny_gives_one_candidate_with_the_exact_problem(activation: str, form: str | None) -> None:
    mut = build("gpt2-tiny", dtype="bfloat16", batch=BATCH, seq=SEQ, device="cpu")
    if activation != "gelu_new":  # the built-in's own is GPT-2's gelu_new; the others from the same config
        config = mut.model.config
        config.activation_function = activation
        torch.manual_seed(0)
        # PreTrainedModel.to is @functools.wraps(Module.to): typeshed's _Wrapped does not bind self
        mut.model = transformers.GPT2LMHeadModel(config).to(torch.bfloat16).eval()  # type: ignore[arg-type]
    candidates = fused_mlp_candidates(mut)
    if form is None:
        assert candidates == []
        return
    (candidate,) = candidates
    # Conv1D's weight is stored K x N (64 x 256): b_layout "kn"; the tokens are batch x sequence
    assert candidate["problem"] == {"M": BATCH * SEQ, "N": 256, "K": 64, "dtype": "bfloat16", "b_layout": "kn",
                                    "gelu": form}  # fmt: skip
    assert candidate["modules"] == ["transformer.h.0.mlp", "transformer.h.1.mlp"] and candidate["calls"] == 2
    assert candidate["baseline_ms"] > 0 and "in isolation" in candidate["baseline_how"]


def test_the_candidate_is_the_profiles_up_projection_gemm(tmp_path: Path) -> None:
    """The fused problem's GEMM part is the one the profile's mapping finds for the c_fc's addmm."""
    mut = build("gpt2-tiny", dtype="bfloat16", batch=BATCH, seq=SEQ, device="cpu")
    ceilings = Ceilings(dram_bytes_per_s=20e9, fp32_flops=100e9, tensor_flops=100e9, how="given by the test")
    report = analyse(capture(mut, warmup=1, iterations=1, trace_path=None), ceilings, model="gpt2-tiny",
                     dtype="bfloat16", batch=BATCH, seq=SEQ)  # fmt: skip
    (candidate,) = fused_mlp_candidates(mut)
    gemm = {k: v for k, v in candidate["problem"].items() if k != "gelu"}
    rows = [op for op in report.operators if (m := family_problem(op, "bfloat16")) and m.problem == gemm]
    assert [op.calls for op in rows] == [candidate["calls"]], [(op.name, op.input_shapes) for op in rows]


def test_a_model_without_gpt2_mlps_has_no_candidate() -> None:
    assert fused_mlp_candidates(build("llama-tiny", dtype="bfloat16", batch=1, seq=8, device="cpu")) == []

    # an MLP of the form whose c_fc this inference does not run is no candidate either
    class RunsOne(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.run, self.idle = torch.nn.Linear(16, 16), Mlp(torch.nn.Linear(16, 48), torch.nn.GELU())

        def forward(self, input: Any) -> Any:
            return self.run(input)

    mut = ModelUnderTest("t", RunsOne().eval(), {"input": torch.randn(2, 16)}, "float32", "cpu")
    assert [m.name for m in find_mlps(mut.model)] == ["idle"] and fused_mlp_candidates(mut) == []


def test_the_markdown_report_says_how_a_fused_baseline_was_taken(tmp_path: Path) -> None:
    mut = build("gpt2-tiny", dtype="float32", batch=1, seq=8, device="cpu")
    ceilings = Ceilings(dram_bytes_per_s=20e9, fp32_flops=100e9, tensor_flops=100e9, how="given by the test")
    report = analyse(capture(mut, warmup=1, iterations=1, trace_path=None), ceilings, model="gpt2-tiny",
                     dtype="float32", batch=1, seq=8)  # fmt: skip
    (candidate,) = fused_mlp_candidates(mut)
    report.tuning = [{
        "operator": "c_fc + act", "input_shapes": [[8, 64]], "family": "matmul_bias_gelu",
        "problem": candidate["problem"], "calls": 2, "baseline_ms": candidate["baseline_ms"],
        "baseline_how": candidate["baseline_how"], "modules": candidate["modules"], "share": None,
        "kernel": "matmul_bias_gelu_triton", "kernel_problem": candidate["problem"], "tuned_ms": 0.01,
        "speedup": candidate["baseline_ms"] / 0.01, "status": "tuned",
    }]  # fmt: skip
    gemm = {k: v for k, v in candidate["problem"].items() if k != "gelu"}
    report.tuning.append({"operator": "aten::addmm", "input_shapes": [], "family": "matmul", "problem": gemm,
                          "calls": 2, "baseline_ms": 0.5, "share": 0.1, "kernel": None, "tuned_ms": None,
                          "speedup": None, "status": FUSED_AWAY})  # fmt: skip
    report.swap = {"swapped": {"c_fc + act {...}": ["transformer.h.0.mlp.c_fc", "transformer.h.0.mlp.act"]},
                   "baseline_ms": 2.0, "swapped_ms": 1.0, "speedup": 2.0, "max_abs_error": 0.02,
                   "rel_l2_error": 0.012, "outputs_match": True, "reference": "a float32 copy of the model",
                   "eager_rel_l2_vs_float32": 0.011, "swapped_rel_l2_vs_float32": 0.013, "rel_l2_tolerance": 0.0165,
                   "eager_max_abs_vs_float32": 0.05, "swapped_max_abs_vs_float32": 0.06,
                   "max_abs_tolerance": 0.4}  # fmt: skip
    write_markdown(report, tmp_path / "report.md")
    text = (tmp_path / "report.md").read_text()
    assert "| `c_fc + act` |" in text and "'gelu': 'tanh'" in text and "matmul_bias_gelu_triton" in text
    assert f"(2 MLPs, 2 calls): baseline {candidate['baseline_how']}" in text
    assert f"| `aten::addmm` | {gemm} | - | {FUSED_AWAY} | 0.500 | - |" in text  # its GEMM, not tuned alone
    assert (
        "against a float32 copy of the model: relative L2 error swapped 0.013, eager 0.011 (bound 0.0165); "
        "largest element error swapped 0.06, eager 0.05 (bound 0.4)"
    ) in text
