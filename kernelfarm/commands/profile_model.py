"""`kernelfarm profile-model`: profile a model's inference per operator; optionally compare with
torch.compile, tune the hot operators on the farm and swap the tuned kernels in."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import typer
from rich.console import Console
from rich.markup import escape

from kernelfarm.commands.jobs import fail
from kernelfarm.context import cli_context
from kernelfarm.core.gpu import model_slug

# Logs of CI jobs are no terminal: a wide console keeps the table's rows on one line there.
# No emoji codes: an operator's, a folder's or a model's name with ":b:" in it is printed as written.
console = Console(stderr=True, width=None if sys.stderr.isatty() else 200, emoji=False)
DEVICE = re.compile(r"auto|cpu|cuda(:[0-9]{1,3})?")
OUTPUTS = "profile.json, trace.json, report.html and report.md"
TUNE_NEEDS_A_GPU = (
    "--tune needs a GPU: the farm tunes kernels for the GPU model the profile ran on, and a CPU is none; "
    "run on the GPU's machine with --device cuda (or cuda:N, or auto)"
)


def profile_model(
    model: str = typer.Argument(..., help="built-in model (gpt2, llama, gpt2-tiny, llama-tiny) or module:function"),
    dtype: str = typer.Option("bfloat16", help="bfloat16, float16 or float32"),
    batch: int = typer.Option(8, min=1, max=4096),
    seq: int = typer.Option(512, min=1, max=1 << 17, help="sequence length"),
    device: str = typer.Option("auto", help="cuda, cuda:N, cpu or auto (cuda when there is a GPU)"),
    warmup: int = typer.Option(3, min=0, max=100),
    iterations: int = typer.Option(10, min=1, max=1000),
    out: Path = typer.Option(
        Path("profile"), help="folder for profile.json, trace.json, report.html and report.md (replaced if there)"
    ),
    compare_compile: bool = typer.Option(False, "--compile", help="also time and profile torch.compile"),
    tune: bool = typer.Option(False, "--tune", help="submit the hot operators to the farm as tuning jobs (a GPU)"),
    top: int = typer.Option(3, min=1, max=20, help="how many hot operators to tune (a fused MLP counts as one)"),
    budget: int = typer.Option(48, min=1, max=10000, help="trials per tuning job"),
    swap: bool = typer.Option(False, "--swap", help="swap tuned kernels into the model and re-measure"),
    ceilings_file: Path = typer.Option(None, "--ceilings", help="JSON of the device's ceilings (else measured)"),
    store: bool = typer.Option(False, "--store", help="store the report in the farm (GET /v1/profiles)"),
    as_json: bool = typer.Option(False, "--json", help="print the report as JSON on stdout"),
) -> None:
    """Profile inference per operator: time, share, FLOP/s, GB/s, bound class, hints, Chrome trace."""
    from kernelfarm.model_profiler import ceilings as device_ceilings
    from kernelfarm.model_profiler.analysis import analyse
    from kernelfarm.model_profiler.capture import capture
    from kernelfarm.model_profiler.models import ModelError, build, check_dtype, check_spec, exception_line
    from kernelfarm.model_profiler.output import OutputError
    from kernelfarm.model_profiler.report import print_table, write_html, write_json, write_markdown

    # What can be checked without torch is checked first: a bad argument is told at once, not after the
    # model was built (or as whatever error building it on a bad device happens to raise).
    if not DEVICE.fullmatch(device):
        fail(f"unknown --device {device!r}: use cuda, cuda:N, cpu or auto")
    try:
        check_spec(model)
        check_dtype(dtype)
    except ModelError as exc:
        fail(str(exc))
    if swap and not tune:
        fail("--swap needs --tune (it swaps in what the farm tuned)")
    if tune and device == "cpu":
        fail(TUNE_NEEDS_A_GPU)
    if out.exists() and not out.is_dir():
        fail(f"--out {out} exists and is not a folder: give a folder (new or one whose {OUTPUTS} may be replaced)")
    given_ceilings = None
    if ceilings_file is not None:
        try:
            given_ceilings = device_ceilings.load(ceilings_file)
        except device_ceilings.CeilingsError as exc:
            fail(f"--ceilings: {exc}")

    try:
        import torch
    except ImportError:
        fail("profile-model needs PyTorch: pip install 'kernelfarm[profile]'")
    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
        if tune and device == "cpu":
            fail(f"{TUNE_NEEDS_A_GPU} (--device auto found no GPU)")
    if device.startswith("cuda"):
        if not torch.cuda.is_available():
            fail(f"--device {device} but torch sees no GPU")
        index = int(device.partition(":")[2] or 0)
        if index >= torch.cuda.device_count():
            fail(f"--device {device}: torch sees {torch.cuda.device_count()} GPU(s), cuda:0 to cuda:N-1")
    try:
        mut = build(model, dtype=dtype, batch=batch, seq=seq, device=device)
    except ModelError as exc:
        fail(str(exc))
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        fail(f"cannot make the folder --out {out}: {exc.strerror or exc}")
    ceilings = given_ceilings or device_ceilings.measure(device)
    try:
        eager = capture(mut, warmup=warmup, iterations=iterations, trace_path=out / "trace.json")
    except (OutputError, ModelError) as exc:
        fail(str(exc))
    report = analyse(eager, ceilings, model=model, dtype=dtype, batch=batch, seq=seq)
    compile_failed = None
    if compare_compile:
        from kernelfarm.model_profiler.compile_ab import compile_ab

        try:
            report.compile_ab = compile_ab(mut, eager, iterations=iterations)
        except Exception as exc:  # torch.compile's own failure (no C++ compiler, an unsupported model):
            # the eager profile is still written, stored and printed; the command then exits 1 saying why
            compile_failed = f"--compile: torch.compile failed, the report has no comparison: {exception_line(exc)}"
    if tune:
        from kernelfarm.model_profiler.fusion import fused_mlp_candidates
        from kernelfarm.model_profiler.tuning import TuningPlan, estimated_end_to_end, tune_hot_operators

        gpu_model = model_slug(eager.device_name)
        client = cli_context().client()
        # timed before any job runs: a farm on this host would load the device and the CPU meanwhile
        fused = fused_mlp_candidates(mut)
        report.tuning = tune_hot_operators(client, report.operators, dtype=dtype, gpu_model=gpu_model,
                                           plan=TuningPlan(budget_trials=budget, top=top), fused=fused,
                                           progress=lambda line: console.print(escape(line)))  # fmt: skip
        estimate = estimated_end_to_end(report.latency_ms, report.tuning)
        for entry in report.tuning:
            entry["estimated_end_to_end_ms"] = estimate
        if swap:
            from kernelfarm.model_profiler.swap import swap_and_measure

            report.swap = swap_and_measure(mut, report.tuning, baseline_ms=report.latency_ms, iterations=iterations)
    try:
        write_json(report, out / "profile.json")
        write_html(report, out / "report.html")
        write_markdown(report, out / "report.md")
    except OutputError as exc:
        fail(str(exc))
    print_table(report, console)
    console.print(  # the folder's name as given: "[/]" in it is no markup
        f"wrote {out / 'profile.json'}, {out / 'trace.json'} (Chrome/Perfetto), {out / 'report.html'}, "
        f"{out / 'report.md'}",
        markup=False,
    )
    if store:
        from kernelfarm.client import ApiError

        body = {"model": model, "device_name": report.device_name, "dtype": dtype, "batch": batch, "seq": seq,
                "latency_ms": report.latency_ms, "report": report.to_json()}  # fmt: skip
        try:
            stored = cli_context().client().store_profile(body)
        except ApiError as exc:
            fail(f"the farm did not store the profile: {exc.message}")
        console.print(f"stored as profile {stored['id']}")
    if as_json:
        typer.echo(json.dumps(report.to_json()))
    if compile_failed is not None:
        fail(compile_failed)
