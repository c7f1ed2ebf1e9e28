"""`kernelfarm profile-model`: profile a model's inference per operator; optionally compare with
torch.compile, tune the hot operators on the farm and swap the tuned kernels in."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import typer
from rich.console import Console

from kernelfarm.context import cli_context
from kernelfarm.core.gpu import model_slug

# Logs of CI jobs are no terminal: a wide console keeps the table's rows on one line there.
console = Console(stderr=True, width=None if sys.stderr.isatty() else 200)


def profile_model(
    model: str = typer.Argument(..., help="built-in model (gpt2, llama, gpt2-tiny, llama-tiny) or module:function"),
    dtype: str = typer.Option("bfloat16", help="bfloat16, float16 or float32"),
    batch: int = typer.Option(8, min=1, max=4096),
    seq: int = typer.Option(512, min=1, max=1 << 17, help="sequence length"),
    device: str = typer.Option("auto", help="cuda, cpu or auto (cuda when there is a GPU)"),
    warmup: int = typer.Option(3, min=0, max=100),
    iterations: int = typer.Option(10, min=1, max=1000),
    out: Path = typer.Option(Path("profile"), help="folder for profile.json, trace.json, report.html and report.md"),
    compare_compile: bool = typer.Option(False, "--compile", help="also time and profile torch.compile"),
    tune: bool = typer.Option(False, "--tune", help="submit the hot operators to the farm as tuning jobs"),
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
    from kernelfarm.model_profiler.models import ModelError, build
    from kernelfarm.model_profiler.report import print_table, write_html, write_json, write_markdown

    try:
        import torch
    except ImportError:
        console.print("[red]error[/]: profile-model needs PyTorch: pip install 'kernelfarm[profile]'")
        raise typer.Exit(1) from None
    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    if device.startswith("cuda") and not torch.cuda.is_available():
        console.print("[red]error[/]: --device cuda but torch sees no GPU")
        raise typer.Exit(1)
    if swap and not tune:
        console.print("[red]error[/]: --swap needs --tune (it swaps in what the farm tuned)")
        raise typer.Exit(1)
    try:
        mut = build(model, dtype=dtype, batch=batch, seq=seq, device=device)
    except ModelError as exc:
        console.print(f"[red]error[/]: {exc}")
        raise typer.Exit(1) from None
    out.mkdir(parents=True, exist_ok=True)
    ceilings = device_ceilings.load(ceilings_file) if ceilings_file else device_ceilings.measure(device)
    eager = capture(mut, warmup=warmup, iterations=iterations, trace_path=out / "trace.json")
    report = analyse(eager, ceilings, model=model, dtype=dtype, batch=batch, seq=seq)
    if compare_compile:
        from kernelfarm.model_profiler.compile_ab import compile_ab

        report.compile_ab = compile_ab(mut, eager, iterations=iterations)
    if tune:
        from kernelfarm.model_profiler.fusion import fused_mlp_candidates
        from kernelfarm.model_profiler.tuning import TuningPlan, estimated_end_to_end, tune_hot_operators

        gpu_model = model_slug(eager.device_name)
        client = cli_context().client()
        # timed before any job runs: a farm on this host would load the device and the CPU meanwhile
        fused = fused_mlp_candidates(mut)
        report.tuning = tune_hot_operators(client, report.operators, dtype=dtype, gpu_model=gpu_model,
                                           plan=TuningPlan(budget_trials=budget, top=top), fused=fused)  # fmt: skip
        estimate = estimated_end_to_end(report.latency_ms, report.tuning)
        for entry in report.tuning:
            entry["estimated_end_to_end_ms"] = estimate
        if swap:
            from kernelfarm.model_profiler.swap import swap_and_measure

            report.swap = swap_and_measure(mut, report.tuning, baseline_ms=report.latency_ms, iterations=iterations)
    write_json(report, out / "profile.json")
    write_html(report, out / "report.html")
    write_markdown(report, out / "report.md")
    print_table(report, console)
    console.print(
        f"wrote {out / 'profile.json'}, {out / 'trace.json'} (Chrome/Perfetto), {out / 'report.html'}, "
        f"{out / 'report.md'}"
    )
    if store:
        from kernelfarm.client import ApiError

        body = {"model": model, "device_name": report.device_name, "dtype": dtype, "batch": batch, "seq": seq,
                "latency_ms": report.latency_ms, "report": report.to_json()}  # fmt: skip
        try:
            stored = cli_context().client().store_profile(body)
        except ApiError as exc:
            console.print(f"[red]error[/]: the farm did not store the profile: {exc.detail if exc.status else exc}")
            raise typer.Exit(1) from None
        console.print(f"stored as profile {stored['id']}")
    if as_json:
        typer.echo(json.dumps(report.to_json()))
