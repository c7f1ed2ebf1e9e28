"""What an outside probe of `kernelfarm profile-model` found: a user's ``module:function`` that raises, returns
something else than ``(model, inputs)`` or whose forward fails ended in a traceback; an operator name with
"[/]" in it (a model's ``record_function`` range) ended the command with rich's MarkupError before
``--store``; such names broke report.md's table and code spans; the HTML bar labels were cut inside an
entity; and a torch.compile that fails (no C++ compiler) lost the whole eager profile in a traceback."""

from __future__ import annotations

import io
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from rich.console import Console

from kernelfarm.model_profiler.analysis import OperatorReport, ProfileReport
from kernelfarm.model_profiler.report import print_table, write_html, write_markdown

HOSTILE = [
    "evil::[/]",
    "evil::[bold red]x",
    "evil::a:b:c:smile:",
    "evil::pipe|tick`x``y",
    "evil::new\nline",
    "evil::<script>alert(1)</script>",
    "evil::\x1b[31mred",
    "evil::\u202eRLO",
    "evil::" + "a" * 50 + "&",  # escaped, its "&amp;" straddles the bar label's 60 characters
]


def operator(name: str, share: float) -> OperatorReport:
    return OperatorReport(name=name, input_shapes=[[4, 32]], calls=1, self_ms=share, share=share, flops=0.0,
                          bytes=0.0, tflops_per_s=0.0, gb_per_s=0.0, bound="compute", fraction_of_peak=0.0,
                          kernels=[f"kernel {name}"], hint=f"{name} is slow: tune")  # fmt: skip


def hostile_report() -> ProfileReport:
    ops = [operator(name, 0.1) for name in HOSTILE]
    return ProfileReport(
        model="evilmodel:build", dtype="float32", batch=4, seq=8, device="cpu", device_name="cpu", latency_ms=1.0,
        profiled_ms=1.0, profiling_overhead=0.0, accounted_ms=0.9, ceilings={}, operators=ops,
        hints=["names like evil::[/] | `x` <b>"],
        tuning=[{"operator": "evil::[/]|x", "problem": {"m": 4}, "kernel": "k|[/]", "status": "failed: [/] | <i>",
                 "baseline_ms": 1.0, "tuned_ms": None}],
    )  # fmt: skip


def test_the_terminal_table_prints_names_as_written() -> None:
    out = io.StringIO()
    console = Console(file=out, width=400, color_system=None, emoji=False)
    print_table(hostile_report(), console)  # was MarkupError: closing tag '[/]' has nothing to close
    text = out.getvalue()
    for shown in ("evil::[/]", "evil::[bold red]x", "evil::a:b:c:smile:", "evil::pipe|tick`x``y",
                  "evil::new\\nline", "evil::\\x1b[31mred", "evil::\\u202eRLO"):  # fmt: skip
        assert shown in text, shown
    assert "\x1b" not in text and "\u202e" not in text  # no terminal escape, no right-to-left override
    assert "failed: [/] | <i>" in text


def table_cells(row: str) -> list[str]:
    assert row.startswith("| ") and row.endswith(" |"), row
    return re.split(r"(?<!\\)\|", row[1:-1])


def test_markdown_keeps_its_table_and_code_spans(tmp_path: Path) -> None:
    write_markdown(hostile_report(), tmp_path / "report.md")
    lines = (tmp_path / "report.md").read_text().splitlines()
    operators = [line for line in lines if line.startswith("| ") and "evil::" in line and "| 0.100 |" in line]
    assert len(operators) == len(HOSTILE)  # one line per operator: the name's line break did not split a row
    for row in operators:
        assert len(table_cells(row)) == 9, row  # its "|" did not end a cell
    (tick,) = [row for row in operators if "tick" in row]
    assert "```evil::pipe\\|tick`x``y```" in tick  # fenced by more backticks than it holds in a row
    for line in lines:  # HTML only in code spans, where markdown shows it as written
        assert "<script>" not in re.sub(r"`[^`]*<script>[^`]*`", "", line), line
    assert any("evil::&lt;script&gt;alert(1)&lt;/script&gt; is slow" in line for line in lines)
    (tuned,) = [line for line in lines if line.startswith("| ") and "failed" in line]
    assert len(table_cells(tuned)) == 6, tuned


def test_html_labels_are_cut_before_they_are_escaped(tmp_path: Path) -> None:
    write_html(hostile_report(), tmp_path / "report.html")
    page = (tmp_path / "report.html").read_text()
    assert "<script>" not in page and "\u202e" not in page and "\x1b" not in page
    for entity in re.findall(r"&[^;\s<]*;?", page):
        assert re.fullmatch(r"&(amp|lt|gt|quot|#x27);", entity), entity  # never "&am" or "&l"


# --- the command, on real models (needs the `profile` extra) ---------------------------------------------

MODELS = """
import torch

NAMES = ["evil::[/]", "evil::[bold red]x", "evil::a:b:c:smile:", "evil::pipe|tick`x``y", "evil::new\\nline"]


class Ranges(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(16, 16)

    def forward(self, x):
        for name in NAMES:
            with torch.profiler.record_function(name):
                x = self.lin(x)
        return x


def ranges(dtype, batch, seq, device):
    return Ranges().to(device=device, dtype=dtype), (torch.randn(batch, 16, device=device, dtype=dtype),)


def returns_a_number(dtype, batch, seq, device):
    return 5


def returns_no_module(dtype, batch, seq, device):
    return object(), {}


def returns_bad_inputs(dtype, batch, seq, device):
    return torch.nn.Linear(2, 2), 5


def raises(dtype, batch, seq, device):
    raise RuntimeError("boom\\ninside the builder")


def wrong_signature():
    return None


def forward_fails(dtype, batch, seq, device):
    return torch.nn.Linear(8, 8).to(dtype=dtype), (torch.randn(2, 3, dtype=dtype),)
"""


def cli(*args: str, cwd: Path, **env: str) -> subprocess.CompletedProcess[str]:
    environment = {**os.environ, "PYTHONPATH": str(cwd), "KERNELFARM_API_URL": "http://127.0.0.1:9",
                   "KERNELFARM_STATE_DIR": str(cwd / "no-stack"), **env}  # fmt: skip
    process = subprocess.Popen([sys.executable, "-P", "-m", "kernelfarm", "profile-model", *args], cwd=cwd,
                               env=environment, text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE)  # fmt: skip
    try:
        stdout, stderr = process.communicate(timeout=300)
    finally:
        process.kill()  # a no-op once it exited; never left running
    return subprocess.CompletedProcess(process.args, process.returncode, stdout, stderr)


def error_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("error: ")]


@pytest.fixture
def models(tmp_path: Path) -> Path:
    pytest.importorskip("torch", reason="building a model needs the `profile` extra (torch)")
    (tmp_path / "probe_models.py").write_text(MODELS)
    (tmp_path / "raises_at_import.py").write_text("raise RuntimeError('at import')\n")
    (tmp_path / "not_python.py").write_text("def (\n")
    return tmp_path


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("probe_models:returns_a_number", "returned an object of type int, not (model, inputs)"),
        ("probe_models:returns_no_module", "as the model, not a torch.nn.Module"),
        ("probe_models:returns_bad_inputs", "as the inputs, not a dict or a tuple"),
        ("probe_models:raises", "raised RuntimeError: boom inside the builder"),
        ("probe_models:wrong_signature", "raised TypeError: wrong_signature() got an unexpected keyword argument"),
        ("probe_models:forward_fails", "probe_models:forward_fails: the model's forward raised RuntimeError: mat1"),
        ("raises_at_import:build", "cannot import 'raises_at_import': RuntimeError: at import"),
        ("not_python:build", "cannot import 'not_python': SyntaxError: invalid syntax"),
    ],
)
def test_a_users_model_that_cannot_be_profiled_is_one_line(models: Path, spec: str, message: str) -> None:
    done = cli(spec, "--device", "cpu", "--dtype", "float32", "--iterations", "1", "--out", "out", cwd=models)
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    (line,) = error_lines(done.stderr)
    assert message in line, done.stderr
    assert not (models / "out" / "profile.json").exists()


def test_operator_names_with_markup_go_through_the_whole_command(models: Path) -> None:
    out = "out[/]:b:"  # the folder's name is printed too
    done = cli("probe_models:ranges", "--device", "cpu", "--dtype", "float32", "--batch", "2", "--iterations", "1",
               "--warmup", "0", "--out", out, "--json", cwd=models)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    report = json.loads(done.stdout)  # --json comes after the table: it was never reached
    names = {op["name"] for op in report["operators"]}
    assert {"evil::[/]", "evil::[bold red]x", "evil::a:b:c:smile:"} <= names
    assert (
        "evil::[/]" in done.stderr
        and "evil::a:b:c:smile:" in done.stderr
        and f"wrote {out}/profile.json" in done.stderr
    )
    assert {p.name for p in (models / out).iterdir()} == {"profile.json", "trace.json", "report.html", "report.md"}


def test_a_failing_torch_compile_keeps_the_eager_profile(models: Path) -> None:
    pytest.importorskip("transformers", reason="the built-in models need the `profile` extra (transformers)")
    done = cli("gpt2-tiny", "--device", "cpu", "--dtype", "float32", "--batch", "1", "--seq", "8", "--iterations", "1",
               "--out", "out", "--compile", "--json", cwd=models, CXX="/kf-no-such-compiler/g++")  # fmt: skip
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr, done.stderr[-3000:]
    (line,) = error_lines(done.stderr)
    assert line.startswith("error: --compile: torch.compile failed, the report has no comparison: "), line
    assert len(line) < 600
    report = json.loads(done.stdout)
    assert report["model"] == "gpt2-tiny" and report["operators"] and report["compile_ab"] is None
    assert {p.name for p in (models / "out").iterdir()} == {"profile.json", "trace.json", "report.html", "report.md"}


def test_a_ceiling_too_large_for_a_float_is_one_line(tmp_path: Path) -> None:
    """JSON's 1 followed by 400 zeros is an int that math.isfinite cannot take: it was an OverflowError."""
    (tmp_path / "huge.json").write_text('{"dram_bytes_per_s": 1' + "0" * 400 + ', "fp32_flops": 1, "tensor_flops": 1}')
    done = cli("gpt2-tiny", "--device", "cpu", "--ceilings", "huge.json", "--out", "out", cwd=tmp_path)
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
    (line,) = error_lines(done.stderr)
    assert "dram_bytes_per_s must be a number > 0, got an integer of 401 digits" in line, line
    assert not (tmp_path / "out").exists()
