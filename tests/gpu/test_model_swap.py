"""profile-model's swap on the GPU: a farm-tuned matmul_triton config replaces a Linear and a Conv1D, the
outputs match eager, and the custom operator really runs (seen by torch's profiler).

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
with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
    with torch.inference_mode():
        model(x)
result["ops"] = sorted({e.key for e in prof.key_averages()})
with torch.inference_mode():
    result["shape"] = list(model(x).shape)
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
    assert "kernelfarm::tuned_matmul" in result["ops"]
    assert "aten::addmm" not in result["ops"] and "aten::mm" not in result["ops"]
