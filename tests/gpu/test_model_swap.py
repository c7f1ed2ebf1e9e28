"""profile-model's swap on the GPU: a farm-tuned matmul_triton config replaces a Linear and a Conv1D, the
outputs match eager, the farm's kernels really run (seen by torch's profiler), and the swapped model
compiles through the custom operator.

Runs in a child process: the test process itself stays without a CUDA context (tests/gpu/availability.py).
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.gpu.availability import gpu_missing

pytestmark = pytest.mark.gpu

CHILD = r"""
import json, torch
from transformers.pytorch_utils import Conv1D
from kernelfarm.model_profiler.models import ModelUnderTest
from kernelfarm.model_profiler.swap import swap_and_measure

torch.manual_seed(0)
model = torch.nn.Sequential(Conv1D(512, 256), torch.nn.GELU(), torch.nn.Linear(512, 1001, bias=False))
model = model.to("cuda", torch.bfloat16).eval()
x = torch.randn(4, 100, 256, device="cuda", dtype=torch.bfloat16)
config = {"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 64, "GROUP_M": 8, "num_warps": 8, "num_stages": 3,
          "TMA": 0, "SUBTILE": 0}
tma = {**config, "TMA": 1, "SUBTILE": 1}
entries = [  # the Conv1D (K x N weight, tiled schedule) and the Linear (N x K weight, odd N padded to 1008: TMA)
    {"operator": "aten::addmm", "kernel": "matmul_triton", "config": config, "speedup": 1.5,
     "problem": {"M": 400, "N": 512, "K": 256, "dtype": "bfloat16", "b_layout": "kn"},
     "kernel_problem": {"M": 400, "N": 512, "K": 256, "dtype": "bfloat16", "b_layout": "kn"}},
    {"operator": "aten::mm", "kernel": "matmul_triton", "config": tma, "speedup": 1.5,
     "problem": {"M": 400, "N": 1001, "K": 512, "dtype": "bfloat16", "b_layout": "nk"},
     "kernel_problem": {"M": 400, "N": 1008, "K": 512, "dtype": "bfloat16", "b_layout": "nk"}},
]
mut = ModelUnderTest("test", model, {"input": x}, "bfloat16", "cuda")
result = swap_and_measure(mut, entries, baseline_ms=1.0, iterations=3)
activities = [torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]
with torch.profiler.profile(activities=activities) as prof:
    with torch.inference_mode():
        model(x)
        torch.cuda.synchronize()
result["ops"] = sorted({e.key for e in prof.key_averages()})
with torch.inference_mode():
    eager_out = model(x)
    result["shape"] = list(eager_out.shape)
    # torch.compile traces the swapped forwards through the custom operator (eager calls the launch itself)
    compiled_out = torch.compile(model)(x)
result["compiled_max_abs_diff"] = float((compiled_out.float() - eager_out.float()).abs().max())
print(json.dumps(result))
"""


@pytest.mark.skipif(gpu_missing() is not None, reason=str(gpu_missing()))
def test_tuned_products_are_swapped_in_and_match_eager() -> None:
    pytest.importorskip("transformers", reason="needs transformers (the `profile` extra)")
    done = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["swapped"] == {
        "aten::addmm {'M': 400, 'N': 512, 'K': 256, 'dtype': 'bfloat16', 'b_layout': 'kn'}": ["0"],
        "aten::mm {'M': 400, 'N': 1008, 'K': 512, 'dtype': 'bfloat16', 'b_layout': 'nk'}": ["2"],
    }, result
    assert result["outputs_match"], result
    assert result["shape"] == [4, 100, 1001]  # the padded columns are not handed on
    assert result["rel_l2_error"] < 1e-2
    assert any(op.startswith("kf_triton_matmul") for op in result["ops"]), result["ops"]  # the farm's kernels ran
    assert "aten::addmm" not in result["ops"] and "aten::mm" not in result["ops"]
    assert result["compiled_max_abs_diff"] < 0.05, result["compiled_max_abs_diff"]


# The fused swap: GPT-2 small's MLPs (Conv1D, K x N weight, tanh GELU) and an MLP of Linear + nn.GELU
# (N x K weight, erf), each with a tiled and a TMA config of matmul_triton's space (the fused kernel's own).
FUSED_CHILD = r"""
import json, sys, torch
from kernelfarm.model_profiler.fusion import fused_mlp_candidates
from kernelfarm.model_profiler.models import ModelUnderTest, build
from kernelfarm.model_profiler.swap import _set_swapped, swap_and_measure

which, schedule = sys.argv[1], sys.argv[2]
config = {"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 64, "GROUP_M": 8, "num_warps": 8, "num_stages": 3,
          "TMA": 0, "SUBTILE": 0}
if schedule == "tma":
    config |= {"TMA": 1, "SUBTILE": 1}
if which == "gpt2":
    mut = build("gpt2", dtype="bfloat16", batch=4, seq=128, device="cuda")
else:
    class Mlp(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.c_fc, self.act, self.c_proj = torch.nn.Linear(256, 1024), torch.nn.GELU(), torch.nn.Linear(1024, 256)
        def forward(self, x):
            return self.c_proj(self.act(self.c_fc(x)))
    torch.manual_seed(0)
    model = torch.nn.Sequential(Mlp(), Mlp()).to("cuda", torch.bfloat16).eval()
    mut = ModelUnderTest("mlp", model, {"input": torch.randn(3, 100, 256, device="cuda", dtype=torch.bfloat16)},
                         "bfloat16", "cuda")
(candidate,) = fused_mlp_candidates(mut)
entry = {"operator": "c_fc + act", "kernel": "matmul_bias_gelu_triton", "config": config, "speedup": 2.0,
         "problem": candidate["problem"], "kernel_problem": candidate["problem"], "modules": candidate["modules"],
         "calls": candidate["calls"], "baseline_ms": candidate["baseline_ms"]}
result = swap_and_measure(mut, [entry], baseline_ms=1.0, iterations=3)
result["candidate"] = candidate

def kernels():
    from torch.profiler import ProfilerActivity, profile
    with profile(activities=[ProfilerActivity.CUDA]) as prof, torch.inference_mode():
        mut.model(**mut.inputs)
        torch.cuda.synchronize()
    return [e.name for e in prof.events() if e.device_type.name == "CUDA"]

swapped_kernels = kernels()  # the A/B ends on the swapped model
names = [n for names in result["swapped"].values() for n in names]
_set_swapped(mut.model, dict.fromkeys(names), on=False)
eager_kernels = kernels()
result["kernels"] = {"swapped": len(swapped_kernels), "eager": len(eager_kernels),
                     "fused_launches": sum(1 for k in swapped_kernels if k.startswith("kf_triton_matmul"))}
print(json.dumps(result))
"""


@pytest.mark.skipif(gpu_missing() is not None, reason=str(gpu_missing()))
@pytest.mark.parametrize("schedule", ["tiled", "tma"])
@pytest.mark.parametrize(
    ("which", "problem", "mlps"),
    [
        ("gpt2", {"M": 512, "N": 3072, "K": 768, "dtype": "bfloat16", "b_layout": "kn", "gelu": "tanh"}, 12),
        ("linear", {"M": 300, "N": 1024, "K": 256, "dtype": "bfloat16", "b_layout": "nk", "gelu": "erf"}, 2),
    ],
)
def test_fused_mlps_are_swapped_in_match_float32_and_launch_fewer_kernels(
    which: str, problem: dict, mlps: int, schedule: str
) -> None:
    pytest.importorskip("transformers", reason="needs transformers (the `profile` extra)")
    done = subprocess.run([sys.executable, "-c", FUSED_CHILD, which, schedule], capture_output=True, text=True,
                          timeout=600, check=False)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["candidate"]["problem"] == problem and result["candidate"]["calls"] == mlps, result["candidate"]
    (names,) = result["swapped"].values()
    assert len(names) == 2 * mlps  # c_fc and act of each MLP
    # against a float32 copy of the model: within the larger of 1e-2 and 1.5 x eager's own error
    assert result["reference"] == "a float32 copy of the model"
    assert result["outputs_match"], result
    assert result["swapped_rel_l2_vs_float32"] <= max(1e-2, 1.5 * result["eager_rel_l2_vs_float32"]), result
    kernels = result["kernels"]
    # one fused kernel per MLP, and per MLP at least the GEMM and GELU's launches less (GPT-2's gelu_new: 8)
    assert kernels["fused_launches"] == mlps, kernels
    fewer = 8 if which == "gpt2" else 1
    assert kernels["eager"] - kernels["swapped"] >= fewer * mlps, kernels


# Eager calls launch the compiled kernel directly once one launch matched the jit function's output; a
# buffer off 16-byte alignment (another specialisation than the compiled one) goes through the jit function.
DIRECT_CHILD = r"""
import json, torch
from kernelfarm.model_profiler import swap

torch.manual_seed(0)
result = {}
base = {"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 64, "GROUP_M": 8, "num_warps": 8, "num_stages": 3}
for label, config in (("tiled", {**base, "TMA": 0, "SUBTILE": 0}), ("tma", {**base, "TMA": 1, "SUBTILE": 1})):
    values = [config[name] for name in swap._config_order("matmul_bias_gelu_triton")]
    a = torch.randn(512, 256, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(256, 384, device="cuda", dtype=torch.bfloat16) / 16
    bias = torch.randn(384, device="cuda", dtype=torch.bfloat16)
    swap._direct.clear()
    swap.DIRECT_LAUNCH = False
    jit = swap._launch_fused(a, w, bias, False, "tanh", values)
    swap.DIRECT_LAUNCH = True
    first = swap._launch_fused(a, w, bias, False, "tanh", values)  # through the jit function, then checked
    (direct,) = swap._direct.values()
    later = [swap._launch_fused(a.clone(), w, bias, False, "tanh", values) for _ in range(3)]  # direct
    storage = torch.empty(512 * 256 + 1, device="cuda", dtype=torch.bfloat16)
    misaligned = storage[1:].view(512, 256)
    misaligned.copy_(a)
    off = swap._launch_fused(misaligned, w, bias, False, "tanh", values) if label == "tiled" else jit
    reference = torch.nn.functional.gelu(a.float() @ w.float() + bias.float(), approximate="tanh")
    result[label] = {
        "taken": direct is not None,
        "same_as_jit": all(torch.equal(out, jit) for out in [first, *later, off]),
        "misaligned_ptr_mod_16": misaligned.data_ptr() % 16,
        "max_abs_error": float((jit.float() - reference).abs().max()),
    }
print(json.dumps(result))
"""


@pytest.mark.skipif(gpu_missing() is not None, reason=str(gpu_missing()))
def test_eager_calls_launch_the_checked_compiled_kernel_directly() -> None:
    done = subprocess.run([sys.executable, "-c", DIRECT_CHILD], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    for label in ("tiled", "tma"):
        assert result[label]["taken"], result
        assert result[label]["same_as_jit"], result
        assert result[label]["max_abs_error"] < 0.1, result
    assert result["tiled"]["misaligned_ptr_mod_16"] != 0  # the jit function's path, same output
