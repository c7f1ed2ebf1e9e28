"""Dashboard and /metrics speed: a 10,000-trial job page in headless Chromium, and /metrics with 100 workers.

    python -m benchmarks.ui.dashboard [--trials 10000] [--workers 100] [--runs 5] [--json out.json]
        [--old-tree DIR --old-label REV]

With ``--old-tree`` (a `git archive` of an older revision, e.g. ``git archive 7552abf | tar -x -C DIR``) a
second API runs that code against the same database, and every browser run measures the old page and the
new one back to back (cold then warm visit each), so both see the same load. The order alternates: old
first on even runs, new first on odd ones, so neither side always gets the machine warmed (or tired) by
the other; ``visit_order_per_run`` in the JSON records it.

Starts its own embedded PostgreSQL and Redis (or uses DATABASE_URL / REDIS_URL), a fresh database made
by the migrations, and the API (`kernelfarm serve-api`, one process, KERNELFARM_METRICS_CACHE_SECONDS=0
so every scrape reads the database: the worst case). It then stores one job of convolution_kernel
with ``--trials`` trials: every config of the kernel's cartesian space in a shuffled order, the valid
ones complete (5 % failed with a runtime kind) and the invalid ones failed as ``constraint``; times,
roofline metrics (against made-up ceilings) and Nsight Compute metrics of the 100 fastest are
synthetic: a page's cost depends on how many points it draws, not on their values. ``--workers``
workers are registered with fresh heartbeats.

Measured (medians over ``--runs``):
- first render: navigation start → the frame after the job page drew its first view: the header and
  summary with progress, the first page of the trial table and the best-so-far-vs-evaluations plot
  (``window.kfFirstRenderMs``), in a fresh browser context (cold: nothing cached) and on a second visit
  in that context (warm);
- complete render: navigation start → the frame after every plot above the fold was drawn as well
  (best so far vs wall time, heatmap, every trial: the last one after Plotly's full bundle loaded;
  ``window.kfCompleteMs``); parallel coordinates and the roofline draw when scrolled into view;
- heatmap switch: from changing the x parameter to the next frame after Plotly drew the new heatmap
  (measured once the page's render is complete);
- /metrics: one scrape over a keep-alive connection with a read token, 50 scrapes; /health the same way,
  as a baseline of how slowly the (shared) machine answers anything;
- the renderer process's CPU time up to the first render and up to the complete render (Chromium's
  ProcessTime): the page's own work, which contention for the cores does not inflate (the GPU process's
  software WebGL is not included).

Needs Chromium (apt-get install chromium) and the dev extras (playwright).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import random
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import httpx
from sqlalchemy import create_engine, insert, text
from sqlalchemy.engine import make_url

from kernelfarm import launcher
from kernelfarm.core.db import session_scope
from kernelfarm.core.migrate import upgrade
from kernelfarm.core.models import Trial, TrialProfile
from kernelfarm.core.store import jobs as job_store
from kernelfarm.core.store.kernels import ensure_kernel
from kernelfarm.core.store.tokens import create_token
from kernelfarm.core.store.workers import WorkerIdentity, register_worker
from kernelfarm.kernels.registry import get_kernel
from kernelfarm.services import EmbeddedPostgres, EmbeddedRedis, free_port, wait_for
from kernelfarm.stack import api_ready

logger = logging.getLogger("ui-bench")
KERNEL = "convolution_kernel"
GPU = "nvidia-geforce-rtx-3090"
FAILURE_KINDS = ("compile", "launch", "timeout", "crash", "wrong_result")


def seed(database_url: str, trials: int, workers: int) -> str:
    """One job with ``trials`` trials and ``workers`` live workers; returns the job id."""
    spec = get_kernel(KERNEL)
    problem = spec.normalize_problem(spec.default_problem)
    space = spec.space
    cartesian = list(range(space.cartesian_size))
    if trials > len(cartesian):
        raise SystemExit(f"{KERNEL} has {len(cartesian)} configs; ask for fewer trials")
    rng = random.Random(1)
    rng.shuffle(cartesian)
    with session_scope(database_url) as session:
        kernel = ensure_kernel(session, spec)
        job = job_store.create_job(session, job_store.NewJob(
            kernel_id=kernel.id, kernel_name=spec.name, problem=problem, problem_key=spec.problem_key(problem),
            gpu_model=GPU, space={"parameters": {}, "constraints": []}, strategy="random", strategy_options={},
            seed=1, budget_trials=trials, budget_seconds=None, parallelism=8, profile="top_k", profile_top_k=100,
            warm_start=False, owner="bench",
        ))  # fmt: skip
        job.state = "complete"
        session.flush()
        rows = []
        start = time.time()
        for seq, index in enumerate(cartesian[:trials]):
            config = _config(space, index)
            failed_kind = None
            if not space.contains(config, problem):
                failed_kind = "constraint"
            elif rng.random() < 0.05:
                failed_kind = rng.choice(FAILURE_KINDS)
            time_ms = (
                None if failed_kind else 0.5 + rng.random() * 4 + 0.01 * sum(hash(str(v)) % 7 for v in config.values())
            )
            finished = start + seq * 0.05
            metrics: dict[str, Any] = {}
            if time_ms is not None:
                flops, moved = 2.0e9, 1.0e8 * (1 + rng.random())
                metrics = {"arithmetic_intensity": flops / moved, "achieved_flops_per_s": flops / (time_ms * 1e-3),
                           "achieved_bytes_per_s": moved / (time_ms * 1e-3), "peak_flops_per_s": 35e12,
                           "peak_bytes_per_s": 0.9e12, "peak_kind": "fp32", "ridge_intensity": 35e12 / 0.9e12,
                           "compile_s": 0.3 + rng.random(), "measure_wall_s": 0.05 + rng.random() * 0.2}  # fmt: skip
            rows.append({
                "job_id": job.id, "seq": seq, "kernel_name": spec.name, "gpu_model": GPU,
                "problem_key": job.problem_key, "config": config, "config_key": space.key(config),
                "state": "failed" if failed_kind else "complete", "attempt": 1, "worker_name": f"bench-{seq % workers}",
                "time_ms": time_ms, "time_p20_ms": time_ms and time_ms * 0.99,
                "time_p80_ms": time_ms and time_ms * 1.01,
                "verified": failed_kind is None, "metrics": metrics, "failure_kind": failed_kind,
                "failure_message": f"synthetic {failed_kind}" if failed_kind else None, "provenance": {},
                "started_at": _at(finished - 0.04), "finished_at": _at(finished),
            })  # fmt: skip
        if rows:
            session.execute(insert(Trial), rows)
        ids = session.execute(text("SELECT id, time_ms FROM trials WHERE job_id = :j AND time_ms IS NOT NULL "
                                   "ORDER BY time_ms LIMIT 100"), {"j": job.id}).all()  # fmt: skip
        profiles = [{
            "trial_id": trial_id, "job_id": job.id, "profiled_at": _at(start), "worker_name": "bench-0",
            "metrics": {"achieved_occupancy_pct": 40 + rng.random() * 50, "dram_throughput_pct": rng.random() * 90,
                        "l2_hit_rate_pct": 30 + rng.random() * 60, "ncu_wall_s": 0.4},
            "batch_size": 8, "wall_seconds": 3.2,
        } for trial_id, _ in ids]  # fmt: skip
        if profiles:
            session.execute(insert(TrialProfile), profiles)
        for n in range(workers):
            register_worker(session, WorkerIdentity(
                name=f"bench-{n}", hostname=f"host-{n // 8}", backend="replay", gpu_model=GPU,
                gpu_name="NVIDIA GeForce RTX 3090", queue=f"gpu.{GPU}",
            ))  # fmt: skip
        return str(job.id)


def _config(space: Any, index: int) -> dict[str, Any]:
    """The config at ``index`` of the cartesian product (last parameter fastest)."""
    config: dict[str, Any] = {}
    for parameter in reversed(space.parameters):
        index, position = divmod(index, len(parameter.values))
        config[parameter.name] = parameter.values[position]
    return {p.name: config[p.name] for p in space.parameters}


def _at(epoch: float) -> Any:
    from datetime import UTC, datetime

    return datetime.fromtimestamp(epoch, UTC)


def fresh_database(server_url: str) -> str:
    name = f"kf_uibench_{uuid.uuid4().hex[:8]}"
    engine = create_engine(server_url, isolation_level="AUTOCOMMIT")
    with engine.connect() as connection:
        connection.execute(text(f'CREATE DATABASE "{name}"'))
    engine.dispose()
    return make_url(server_url).set(database=name).render_as_string(hide_password=False)


def drop_database(server_url: str, database_url: str) -> None:
    engine = create_engine(server_url, isolation_level="AUTOCOMMIT")
    with engine.connect() as connection:
        connection.execute(text(f'DROP DATABASE IF EXISTS "{make_url(database_url).database}" WITH (FORCE)'))
    engine.dispose()


BROWSER_KEYS = (
    "first_render_cold_ms", "first_render_warm_ms", "heatmap_switch_ms", "first_render_cold_renderer_cpu_ms",
    "first_render_warm_renderer_cpu_ms", "complete_render_cold_ms", "complete_render_warm_ms",
    "complete_render_cold_renderer_cpu_ms", "complete_render_warm_renderer_cpu_ms", "load_average_per_run",
)  # fmt: skip


def visit_order(labels: list[str], run: int) -> list[str]:
    """The targets in the order run ``run`` visits them: as given on even runs, reversed on odd ones."""
    return list(labels) if run % 2 == 0 else list(reversed(labels))


def browser_figures(
    targets: dict[str, str], token: str, job_id: str, runs: int
) -> tuple[dict[str, dict[str, Any]], list[list[str]]]:
    """Per target (label → API URL), the page figures over ``runs`` runs, and each run's visit order; each
    run visits every target in turn (a fresh context each, in ``visit_order``), so the targets are
    measured interleaved, under the same load."""
    from playwright.sync_api import sync_playwright

    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        raise SystemExit("no Chromium: apt-get install chromium")
    out: dict[str, dict[str, Any]] = {label: {k: [] for k in BROWSER_KEYS} for label in targets}
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium, headless=True,
                                             args=["--no-sandbox", "--use-angle=swiftshader",
                                                   "--enable-unsafe-swiftshader"])  # fmt: skip
        orders = [visit_order(list(targets), run) for run in range(runs)]
        for order in orders:
            for label in order:
                _one_run(browser, targets[label], token, job_id, label, out[label])
        browser.close()
    return out, orders


def _one_run(browser: Any, api_url: str, token: str, job_id: str, label: str, figures: dict[str, Any]) -> None:
    """A fresh context: a cold visit, then a warm one (and the heatmap switches on the warm one)."""
    figures["load_average_per_run"].append(os.getloadavg()[0])
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    # The dashboard's own login (the cookie holds a session's secret, not the token)
    login = context.request.post(f"{api_url}/ui/session", data={"token": token})
    assert login.status == 204, login.text()
    for visit in ("cold", "warm"):
        page = context.new_page()
        cdp = context.new_cdp_session(page)
        cdp.send("Performance.enable")
        before = _process_seconds(cdp)
        page.goto(f"{api_url}/ui/jobs/{job_id}")
        page.wait_for_selector("body[data-rendered='1']", timeout=60_000)
        figures[f"first_render_{visit}_ms"].append(page.evaluate("window.kfFirstRenderMs"))
        after = _process_seconds(cdp)
        figures[f"first_render_{visit}_renderer_cpu_ms"].append(1000 * (after - before if after >= before else after))
        page.wait_for_selector("body[data-complete='1']", timeout=60_000)
        figures[f"complete_render_{visit}_ms"].append(page.evaluate("window.kfCompleteMs"))
        after = _process_seconds(cdp)
        figures[f"complete_render_{visit}_renderer_cpu_ms"].append(
            1000 * (after - before if after >= before else after)
        )
        logger.info("%s %s: first %.0f ms, complete %.0f ms; stages %s; requested-first byte-loaded: %s",
                    label, visit, figures[f"first_render_{visit}_ms"][-1], figures[f"complete_render_{visit}_ms"][-1],
                    page.evaluate("window.kfStages"), page.evaluate(PLOTLY_LOADED))  # fmt: skip
        if visit == "warm":
            page.wait_for_load_state("networkidle")
            for x in ("tile_size_x", "block_size_y", "read_only", "block_size_x"):
                figures["heatmap_switch_ms"].append(page.evaluate(SWITCH, x))
        page.close()
    context.close()


def _process_seconds(cdp: Any) -> float:
    """CPU seconds the page's renderer process has used (Chromium's Performance.getMetrics ProcessTime):
    the page's own work, whatever else the machine's cores were busy with."""
    metrics = {m["name"]: m["value"] for m in cdp.send("Performance.getMetrics")["metrics"]}
    return float(metrics.get("ProcessTime", 0.0))


PLOTLY_LOADED = """performance.getEntriesByType('resource')
  .filter(e => e.name.includes('/ui/vendor/plotly') || e.name.includes('/trial-columns')
    || e.name.endsWith('/convergence'))
  .map(e => `${e.name.split('/').pop()} ${Math.round(e.requestStart)}-${Math.round(e.responseStart)}-`
    + `${Math.round(e.responseEnd)} ms`).join(', ')"""
SWITCH = """async (x) => {
  const select = document.getElementById('heat-x');
  const started = performance.now();
  select.value = x;
  select.dispatchEvent(new Event('change'));
  await new Promise((done) => requestAnimationFrame(() => setTimeout(done, 0)));
  return performance.now() - started;
}"""


def scrape_figures(api_url: str, token: str, scrapes: int) -> dict[str, Any]:
    """/metrics, and /health the same way as a baseline: how long the loaded machine takes to answer
    anything at all."""
    out: dict[str, Any] = {}
    with httpx.Client(base_url=api_url, headers={"Authorization": f"Bearer {token}"}, timeout=30) as client:
        for path, key in (("/health", "health_baseline_ms"), ("/metrics", "metrics_scrape_ms")):
            client.get(path).raise_for_status()  # connection and first-use costs
            times = []
            for _ in range(scrapes):
                started = time.perf_counter()
                response = client.get(path)
                times.append((time.perf_counter() - started) * 1000)
                response.raise_for_status()
            out[key] = times
    out["metrics_bytes"] = len(response.content)
    return out


def _medians(figures: dict[str, Any]) -> dict[str, float]:
    """The median of each list of numbers (the visit orders and load averages are not figures)."""
    return {
        k: round(statistics.median(v), 1)
        for k, v in figures.items()
        if isinstance(v, list) and "load" not in k and v and all(isinstance(x, int | float) for x in v)
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trials", type=int, default=10_000)
    parser.add_argument("--workers", type=int, default=100)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--json", type=Path)
    parser.add_argument("--keep", action="store_true", help="leave the API running until Ctrl-C (to look around)")
    parser.add_argument("--old-tree", type=Path, help="a `git archive` of an older revision: measure its page too")
    parser.add_argument("--old-label", default="old", help="what to call the old tree in the output (its revision)")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    logging.getLogger("httpx").setLevel(logging.WARNING)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))  # run the cleanup below
    scratch = Path(tempfile.mkdtemp(prefix="kf-uibench-"))
    embedded: list[Any] = []
    api = None
    old_api = None
    server_url = os.environ.get("DATABASE_URL")
    redis_url = os.environ.get("REDIS_URL")
    try:
        if not server_url:
            postgres = EmbeddedPostgres(scratch / "pg")
            postgres.start()
            embedded.append(postgres)
            server_url = postgres.url
        if not redis_url:
            redis = EmbeddedRedis(scratch / "redis")
            redis.start()
            embedded.append(redis)
            redis_url = redis.url
        database_url = fresh_database(server_url)
        upgrade(database_url)
        started = time.perf_counter()
        job_id = seed(database_url, args.trials, args.workers)
        logger.info(
            "stored %d trials and %d workers in %.1f s", args.trials, args.workers, time.perf_counter() - started
        )
        with session_scope(database_url) as session:
            token = create_token(session, "bench", ["read"])
        port = free_port()
        env = launcher.component_env(database_url, redis_url, overrides={
            "KERNELFARM_METRICS_CACHE_SECONDS": "0", "KERNELFARM_WORKER_TTL_SECONDS": "3600"})  # fmt: skip
        env.pop("PROMETHEUS_MULTIPROC_DIR", None)
        api = subprocess.Popen(launcher.api_argv(port), env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                               start_new_session=True)  # fmt: skip
        api_url = f"http://127.0.0.1:{port}"
        targets = {"new": api_url}
        if args.old_tree:
            # The old code's API on the same database: PYTHONPATH puts its `kernelfarm` first (-P keeps
            # the working directory off sys.path).
            old_port = free_port()
            old_env = {**env, "PYTHONPATH": str(args.old_tree.resolve())}
            old_api = subprocess.Popen(
                launcher.api_argv(old_port), env=old_env, cwd=args.old_tree, stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL, start_new_session=True,
            )  # fmt: skip
            targets = {args.old_label: f"http://127.0.0.1:{old_port}", **targets}
        for url in targets.values():
            wait_for(lambda url=url: api_ready(url), 60, f"the API at {url}")
        with httpx.Client(base_url=api_url, headers={"Authorization": f"Bearer {token}"}) as client:
            live = len(client.get("/v1/workers").json())
        assert live == args.workers, f"{live} live workers, expected {args.workers}"
        figures: dict[str, Any] = {"trials": args.trials, "workers": args.workers, "runs": args.runs,
                                   "load_average_before": os.getloadavg()}  # fmt: skip
        figures |= scrape_figures(api_url, token, 50)
        if args.runs:
            pages, orders = browser_figures(targets, token, job_id, args.runs)
            figures["visit_order_per_run"] = orders
            figures |= pages.pop("new")
            for label, old in pages.items():
                figures[label] = old | {"median": _medians(old)}
        figures["load_average_after"] = os.getloadavg()
        summary = _medians(figures)
        figures["median"] = summary
        print(json.dumps({"new": summary, **{k: v["median"] for k, v in figures.items() if isinstance(v, dict)
                                             and "median" in v}}, indent=2))  # fmt: skip
        if args.json:
            args.json.write_text(json.dumps(figures, indent=2))
        if args.keep:
            print(f"API {api_url}  job /ui/jobs/{job_id}  token {token}  DATABASE_URL={database_url}", flush=True)
            with contextlib.suppress(KeyboardInterrupt):
                time.sleep(3600)
        drop_database(server_url, database_url)
    finally:
        for process in (api, old_api):
            if process is not None:
                process.terminate()
                process.wait(20)
        for item in embedded:
            if isinstance(item, EmbeddedPostgres):
                item.stop("immediate")
            elif isinstance(item, EmbeddedRedis) and item.pid:
                os.kill(item.pid, 15)
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
