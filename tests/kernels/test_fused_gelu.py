"""The fused matmul + bias + GELU kernel's ``gelu`` form (erf or tanh): problem validation, keys that
stay those of problems stored before the parameter existed, the jit constexpr each kernel gets, and the
jit epilogue itself run by Triton's CPU interpreter against a float64 reference."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from kernelfarm.core.errors import InvalidInput
from kernelfarm.kernels.matmul_bias_gelu_triton.spec import gelu
from kernelfarm.kernels.registry import get_kernel
from kernelfarm.kernels.triton_kernel import BufferArg, TritonKernel

FUSED = get_kernel("matmul_bias_gelu_triton")
MATMUL = get_kernel("matmul_triton")
STORED = {"M": 4096, "N": 3072, "K": 768, "dtype": "bfloat16", "b_layout": "kn"}  # a problem stored before `gelu`
TILED = {"BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 32, "GROUP_M": 8, "num_warps": 4, "num_stages": 2, "TMA": 0,
         "SUBTILE": 0}  # fmt: skip
REPO = Path(__file__).resolve().parents[2]


def test_gelu_defaults_to_erf_and_an_erf_problem_keeps_its_old_key() -> None:
    erf = FUSED.normalize_problem(STORED)
    assert erf == STORED | {"gelu": "erf"}
    assert FUSED.problem_key(erf) == "M=4096,N=3072,K=768,dtype=bfloat16,b_layout=kn"
    tanh = FUSED.normalize_problem(STORED | {"gelu": "tanh"})
    assert FUSED.problem_key(tanh) == "M=4096,N=3072,K=768,dtype=bfloat16,b_layout=kn,gelu=tanh"
    # a stored problem (no gelu) is the erf problem for the nearest-problem fallback, never the tanh one
    assert FUSED.problem_distance(STORED, erf) == 0.0
    assert FUSED.problem_distance(STORED, tanh) == float("inf")


@pytest.mark.parametrize("bad,reason", [("sigmoid", r"gelu='sigmoid' is not one of \['erf', 'tanh'\]"),
                                        (1, "gelu must be a string")])  # fmt: skip
def test_an_unknown_gelu_form_is_refused_with_the_reason(bad: object, reason: str) -> None:
    with pytest.raises(InvalidInput, match=reason):
        FUSED.normalize_problem(STORED | {"gelu": bad})


def test_matmul_triton_has_no_gelu_parameter() -> None:
    with pytest.raises(InvalidInput, match="no problem parameters"):
        MATMUL.normalize_problem(STORED | {"gelu": "tanh"})


@pytest.mark.parametrize("tma", [0, 1])
def test_each_form_compiles_its_own_epilogue_and_the_plain_product_none(tma: int) -> None:
    config = TILED | {"TMA": tma}
    fused, plain = FUSED.impl("triton", TritonKernel), MATMUL.impl("triton", TritonKernel)
    for form, epilogue in (("erf", 1), ("tanh", 2)):
        problem = FUSED.normalize_problem(STORED | {"gelu": form})
        assert fused.constexprs(config, problem)["EPILOGUE"] == epilogue
        assert fused.arguments(config, problem, 132)["bias_ptr"] == BufferArg("bias")
    problem = MATMUL.normalize_problem(STORED)
    assert plain.constexprs(config, problem)["EPILOGUE"] == 0
    assert plain.arguments(config, problem, 132)["bias_ptr"] == BufferArg("C")  # never read


def test_the_reference_formulas_are_gelu_new_and_the_exact_gelu() -> None:
    torch = pytest.importorskip("torch")
    z = np.linspace(-12.0, 12.0, 2001)
    tanh_ref = torch.nn.functional.gelu(torch.from_numpy(z), approximate="tanh").numpy()
    erf_ref = torch.nn.functional.gelu(torch.from_numpy(z)).numpy()
    assert np.allclose(gelu(z, "tanh", np, None), tanh_ref, rtol=1e-12, atol=1e-12)
    assert np.allclose(gelu(z, "erf", np, lambda x: torch.erf(torch.from_numpy(x)).numpy()), erf_ref, atol=1e-12)
    assert not np.allclose(tanh_ref, erf_ref, atol=1e-4)  # the two forms differ: the parameter matters


# The jit function under Triton's interpreter (numpy on the CPU). In fp32 (bf16 has no numpy type, and
# fp16's rounding, 5e-4, would hide the difference between the forms, 3e-5 of the norm): each epilogue must
# match its own float64 formula far closer than the other form's. TRITON_INTERPRET must be set before
# triton is imported: a child process.
INTERPRETED = textwrap.dedent("""
    import json, sys, warnings
    import torch
    from kernelfarm.kernels.triton_jit import matmul as jit
    warnings.simplefilter("ignore")  # numpy's overflow of exp(-2u) for very negative x: inf gives -0, as on the GPU
    torch.manual_seed(0)
    M, N, K, BM, BN = 70, 48, 40, 32, 16
    a, b = torch.randn(M, K), torch.randn(N, K)
    bias = torch.randn(N) * 4  # wide inputs: both tails of the GELU
    errors = {}
    for epilogue in (0, 1, 2):
        c = torch.empty(M, N)
        grid = (-(-M // BM) * -(-N // BN),)
        jit.kf_triton_matmul[grid](a, b, c, bias, M, N, K, K, 1, 1, K, N, 1, BLOCK_M=BM, BLOCK_N=BN,
                                   BLOCK_K=16, GROUP_M=8, EPILOGUE=epilogue)
        z = a.double() @ b.double().T + (bias.double() if epilogue else 0)
        refs = {0: z, 1: torch.nn.functional.gelu(z), 2: torch.nn.functional.gelu(z, approximate="tanh")}
        errors[epilogue] = [float((c.double() - refs[e]).norm() / refs[e].norm()) for e in (0, 1, 2)]
    print(json.dumps(errors))
""")


def test_the_jit_epilogues_compute_their_gelu_under_the_interpreter() -> None:
    pytest.importorskip("triton")
    pytest.importorskip("torch")
    env = os.environ | {"TRITON_INTERPRET": "1"}
    done = subprocess.run([sys.executable, "-c", INTERPRETED], env=env, cwd=REPO, capture_output=True, text=True,
                          timeout=120, check=False)  # fmt: skip
    assert done.returncode == 0, done.stderr
    import json

    errors = {int(k): v for k, v in json.loads(done.stdout).items()}  # epilogue -> error against 0, 1, 2
    for epilogue, against in errors.items():
        own, others = against[epilogue], [e for form, e in enumerate(against) if form != epilogue]
        assert own < 1e-6 and all(other > 1e-5 for other in others), errors
