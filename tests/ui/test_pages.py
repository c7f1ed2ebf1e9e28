"""Every dashboard page in a real Chromium: loads with zero console errors and zero failed requests,
shows the farm's data, and is screenshotted (see conftest.py for where)."""

from __future__ import annotations

import csv
import io
import re
import statistics
import uuid
from collections.abc import Callable
from datetime import datetime, timedelta
from decimal import ROUND_HALF_UP, Decimal
from typing import Any

import httpx
import pytest

from tests.conftest import RTX3090
from tests.ui.conftest import Dashboard, PageWatch, visit


def test_a_browser_without_a_session_sees_no_page(dashboard: Dashboard, chromium: Any) -> None:
    context = chromium.new_context()
    page = context.new_page()
    for path in (
        "/ui/jobs",
        f"/ui/jobs/{dashboard.finished_job}",
        "/ui/new",
        "/ui/kernels",
        "/ui/fleet",
        "/ui/profiles",
        f"/ui/profiles/{uuid.uuid4()}",
    ):
        page.goto(f"{dashboard.url}{path}")
        assert re.search(r"/ui/login\?next=", page.url), path
        assert page.locator("#jobs, #summary, #new-job, #kernel-list, #models, #profiles, #operators").count() == 0
    assert context.request.get(f"{dashboard.url}/v1/jobs").status == 401
    page.fill("#token", "kf_not-a-token")
    page.click("button[type=submit]")
    page.wait_for_selector("#login-error:not([hidden])")
    assert "invalid" in page.inner_text("#login-error")
    assert "/ui/login" in page.url and not [c for c in context.cookies() if c["name"] == "kf_session"]
    page.screenshot(path=str(dashboard.artifacts / "login-refused.png"))
    context.close()


def test_every_page_loads_cleanly(dashboard: Dashboard, logged_in: Any) -> None:
    jobs = visit(logged_in, dashboard, "/ui/jobs", "jobs")
    assert jobs.locator(f"tr[data-job-id='{dashboard.finished_job}'] .job-state").inner_text() == "complete"
    assert jobs.locator(f"tr[data-job-id='{dashboard.running_job}'] .job-state").inner_text() == "running"
    jobs.select_option("select[name=state]", "running")
    jobs.wait_for_function("document.querySelectorAll('#jobs tbody tr[data-job-id]').length === 1")
    jobs.close()

    fleet = visit(logged_in, dashboard, "/ui/fleet", "fleet")
    assert fleet.locator(f"#models tr[data-gpu-model='{RTX3090}']").count() == 1
    assert fleet.locator("#workers tbody tr").count() >= 3
    fleet.close()

    kernels = visit(logged_in, dashboard, "/ui/kernels", "kernels")
    matrix = kernels.locator("section[data-kernel='convolution_kernel'] table.best-matrix")
    assert RTX3090 in matrix.inner_text()
    kernels.close()

    new = visit(logged_in, dashboard, "/ui/new", "new-job")
    assert new.locator("#ranges .range").count() >= 2
    new.close()

    running = visit(logged_in, dashboard, f"/ui/jobs/{dashboard.running_job}", "job-running")
    before = int(running.inner_text("#trial-count").split(" of ")[1].split()[0])
    # Live: the running job's trials appear without a reload.
    running.wait_for_function(f"Number(document.querySelector('#trial-count').textContent.split(' of ')[1]"
                              f".split(' ')[0]) > {before}", timeout=30_000)  # fmt: skip
    assert running.watch.problems == []
    running.close()

    for path, shot in (("/docs", "swagger-ui"), ("/redoc", "redoc")):
        page = logged_in.new_page()
        watch = PageWatch(page)
        requested: list[str] = []
        page.on("request", lambda r, seen=requested: seen.append(r.url))
        page.goto(f"{dashboard.url}{path}")
        page.wait_for_selector(".swagger-ui .info, .api-info", timeout=30_000)
        page.wait_for_load_state("networkidle")
        page.screenshot(path=str(dashboard.artifacts / f"{shot}.png"))
        assert watch.problems == [], watch.problems
        assert all(u.startswith(dashboard.url) or u.startswith(("data:", "blob:")) for u in requested), requested
        page.close()


def _job_data(dashboard: Dashboard, job_id: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    with dashboard.client() as client:
        job = client.get(f"/v1/jobs/{job_id}").json()
        trials = client.get(f"/v1/jobs/{job_id}/trials", params={"limit": 1000}).json()["items"]
    return job, trials


def test_job_plots_hold_the_trials(dashboard: Dashboard, logged_in: Any) -> None:
    job, trials = _job_data(dashboard, dashboard.finished_job)
    complete = [t for t in trials if t["state"] == "complete"]
    page = visit(logged_in, dashboard, f"/ui/jobs/{dashboard.finished_job}", "job-finished")
    parcoords = page.evaluate("document.getElementById('parcoords').data[0].dimensions.map(d => d.values.length)")
    assert set(parcoords) == {len(complete)}

    best_line = page.evaluate("document.getElementById('conv-evals').kfSeries.y")
    assert best_line[-1] == pytest.approx(job["best"]["time_ms"])
    assert best_line == sorted(best_line, reverse=True)  # best so far never gets worse
    assert page.locator("#conv-evals svg circle").count() == len(best_line)  # drawn, one marker a point
    # The page's curve from every trial is the API's (the first view's) and the trials' own.
    drawn = page.evaluate("document.getElementById('conv-evals').kfSeries")
    expected = _convergence(job, trials)
    assert drawn["x"] == [e for e, _ in expected] and drawn["y"] == pytest.approx([b for _, b in expected])
    scatter = page.evaluate("document.getElementById('all-trials').data[0]")
    assert sorted(scatter["y"]) == pytest.approx(sorted(t["time_ms"] for t in complete))
    # the prior it learned from (issue 17), which the finished job's status message no longer says
    prior = job["warm_start_prior"]
    warm = page.inner_text("#summary [data-key='warm start']")
    if prior["state"] == "none":
        assert "cold start: no other GPU model had tuned this kernel and problem" in warm
    else:
        assert f"{prior['trials']} trials from {', '.join(prior['sources'])}" in warm

    # The heatmap: the median time of the complete trials in each cell, for the parameters picked.
    for x, y in (("block_size_x", "block_size_y"), ("tile_size_x", "tile_size_y")):
        page.select_option("#heat-x", x)
        page.select_option("#heat-y", y)
        heat = page.evaluate("(() => { const d = document.getElementById('heatmap').data[0];"
                             " return {x: d.x, y: d.y, z: d.z}; })()")  # fmt: skip
        cells: dict[tuple[str, str], list[float]] = {}
        for t in complete:
            cells.setdefault((str(t["config"][x]), str(t["config"][y])), []).append(t["time_ms"])
        shown = {(heat["x"][i], heat["y"][j]): v for j, row in enumerate(heat["z"]) for i, v in enumerate(row)
                 if v is not None}  # fmt: skip
        assert shown == pytest.approx({k: statistics.median(v) for k, v in cells.items()})
    assert page.watch.problems == []
    page.close()


def _finish_order(job: dict[str, Any]) -> Callable[[dict[str, Any]], tuple[Decimal, int]]:
    """The order the API's curve puts finished trials in (core/store/trial_table.py): seconds since the
    job was created, rounded half up to 0.1 ms, then proposal order. Sorting the finished_at strings
    was flaky: two replay workers finish trials tens of microseconds apart (a rounded tie that seq
    decides), and a timestamp on a whole second is written without a fraction (it sorts last)."""
    created = datetime.fromisoformat(job["created_at"])

    def key(trial: dict[str, Any]) -> tuple[Decimal, int]:
        micros = (datetime.fromisoformat(trial["finished_at"]) - created) // timedelta(microseconds=1)
        return Decimal(micros).scaleb(-6).quantize(Decimal("0.0001"), ROUND_HALF_UP), trial["seq"]

    return key


def _convergence(job: dict[str, Any], trials: list[dict[str, Any]]) -> list[tuple[int, float]]:
    """(evaluations, best so far) where the best complete time improves, and at the last finished trial."""
    finished = sorted((t for t in trials if t["state"] in ("complete", "failed") and t["finished_at"]),
                      key=_finish_order(job))  # fmt: skip
    points, best = [], float("inf")
    for k, trial in enumerate(finished, 1):
        improves = trial["state"] == "complete" and trial["time_ms"] is not None and trial["time_ms"] < best
        best = trial["time_ms"] if improves else best
        if best < float("inf") and (improves or k == len(finished)):
            points.append((k, best))
    return points


def test_the_first_view_answers_are_slices_of_the_whole(dashboard: Dashboard) -> None:
    """/convergence is the trials' best-so-far curve; /trial-columns?limit=n is the first n trials of
    the whole document, with the whole job's count and columns."""
    job, trials = _job_data(dashboard, dashboard.finished_job)
    with dashboard.client() as client:
        curve = client.get(f"/v1/jobs/{dashboard.finished_job}/convergence").json()
        whole = client.get(f"/v1/jobs/{dashboard.finished_job}/trial-columns").json()
        head = client.get(f"/v1/jobs/{dashboard.finished_job}/trial-columns", params={"limit": 7}).json()
        assert client.get(f"/v1/jobs/{dashboard.finished_job}/trial-columns", params={"limit": 0}).status_code == 422
        assert client.get(f"/v1/jobs/{uuid.uuid4()}/convergence").status_code == 404
    expected = _convergence(job, trials)
    assert curve["finished"] == len([t for t in trials if t["state"] in ("complete", "failed")])
    assert curve["evaluations"] == [e for e, _ in expected]
    assert curve["best_ms"] == pytest.approx([b for _, b in expected])
    assert len(curve["wall_s"]) == len(expected) and curve["wall_s"] == sorted(curve["wall_s"])
    assert head["count"] == whole["count"] == len(trials) > 7
    for key in ("parameters", "ceilings", "kernel"):
        assert head[key] == whole[key], key
    for key in ("id", "seq", "state", "failure_kind", "time_ms", "finished_s", "worker"):
        assert head[key] == whole[key][:7], key
    for group in ("config", "metrics", "profile"):
        assert head[group].keys() == whole[group].keys(), group
        assert all(head[group][k] == whole[group][k][:7] for k in head[group]), group


def test_the_first_view_needs_no_plotly(dashboard: Dashboard, logged_in: Any) -> None:
    """With Plotly's bundles unreachable the job page still draws its first view (header, table, the
    convergence plot); only the Plotly plots are missing."""
    page = logged_in.new_page()
    page.route("**/ui/vendor/plotly*", lambda route: route.abort())
    requested: list[str] = []
    page.on("request", lambda r: requested.append(r.url.removeprefix(dashboard.url)))
    console: list[str] = []
    page.on("console", lambda m: console.append(m.text))
    page.goto(f"{dashboard.url}/ui/jobs/{dashboard.finished_job}")
    page.wait_for_selector("body[data-rendered='1']", timeout=30_000)
    finished, trials = _job_data(dashboard, dashboard.finished_job)
    assert page.locator("#summary .bar").count() == 1
    assert page.locator("#trials tbody tr").count() == min(50, len(trials))
    assert page.locator("#conv-evals svg circle").count() == len(_convergence(finished, trials))
    assert page.evaluate("window.Plotly") is None
    # The first view's three answers are preloaded from the page's head and the script uses those
    # preloads: each is asked for once (an unmatched preload would be asked for twice, and warned of).
    job = f"/v1/jobs/{dashboard.finished_job}"
    page.wait_for_timeout(500)
    for path in (job, f"{job}/trial-columns?limit=50", f"{job}/convergence"):
        assert requested.count(path) == 1, (path, requested)
    assert not [m for m in console if "preload" in m], console
    page.close()


def test_trial_table_sorts_filters_and_downloads(dashboard: Dashboard, logged_in: Any) -> None:
    job, trials = _job_data(dashboard, dashboard.finished_job)
    page = visit(logged_in, dashboard, f"/ui/jobs/{dashboard.finished_job}", "job-table")
    page.select_option("#trial-state", "complete")
    page.click("#trials th[data-key='time_ms']")
    first_time = float(page.locator("#trials tbody tr").first.locator("td").nth(3).inner_text())
    assert first_time == pytest.approx(job["best"]["time_ms"], rel=1e-3)
    value = trials[0]["config"]["block_size_x"]
    page.fill("#trial-filter", f"block_size_x={value}")
    expected = [t for t in trials if t["state"] == "complete" and t["config"]["block_size_x"] == value]
    page.wait_for_function(f"document.querySelector('#trial-count').textContent.startsWith('{len(expected)} of')")
    with page.expect_download() as download:
        page.click("#csv")
    rows = list(csv.DictReader(io.StringIO(download.value.path().read_text())))
    assert len(rows) == len(expected)
    assert sorted(float(r["time_ms"]) for r in rows) == pytest.approx(sorted(t["time_ms"] for t in expected))
    assert {r["block_size_x"] for r in rows} == {str(value)}
    # A value holding "=" is the whole value (it used to be cut at the second "=" and match the first part).
    page.fill("#trial-filter", f"block_size_x={value}=1")
    page.wait_for_function("document.querySelector('#trial-count').textContent.startsWith('0 of')")
    assert page.watch.problems == []
    page.close()


def test_a_job_started_from_the_form_runs_to_completion(dashboard: Dashboard, logged_in: Any) -> None:
    page = visit(logged_in, dashboard, "/ui/new", "new-job-form")
    page.select_option("#kernel", "convolution_kernel")
    page.fill("#gpu_model", RTX3090)
    page.select_option("#strategy", "random")
    page.fill("#budget_trials", "12")
    page.fill("#seed", "3")
    page.uncheck("#warm_start")
    # Restrict block_size_x to its first two values.
    row = page.locator(".range[data-parameter='block_size_x']")
    boxes = row.locator("input[type=checkbox]")
    kept = [row.locator("label").nth(i).inner_text().strip() for i in range(2)]
    for i in range(2, boxes.count()):
        boxes.nth(i).uncheck()
    page.click("#submit")
    page.wait_for_url(re.compile(r"/ui/jobs/[0-9a-f-]{36}$"))
    page.wait_for_selector("body[data-state='complete']", timeout=90_000)
    page.wait_for_load_state("networkidle")
    page.screenshot(path=str(dashboard.artifacts / "job-from-form.png"), full_page=True)
    assert page.watch.problems == []
    job_id = page.url.rsplit("/", 1)[1]
    job, trials = _job_data(dashboard, job_id)
    assert job["state"] == "complete" and job["progress"]["total"] == 12 and job["owner"] == "ui-user"
    assert job["objective"] == "time" and job["warm_start"] is False and job["warm_start_prior"] is None
    assert page.inner_text("#summary [data-key='warm start']").endswith("off (cold start by request)")
    assert {str(t["config"]["block_size_x"]) for t in trials} <= set(kept)
    page.close()


def test_forms_are_csrf_safe(dashboard: Dashboard, logged_in: Any) -> None:
    """The session cookie alone cannot submit a job: the CSRF header must match it."""
    cookies = {c["name"]: c["value"] for c in logged_in.cookies()}
    body = {"kernel": "convolution_kernel", "gpu_model": RTX3090, "budget_trials": 1}
    with httpx.Client(base_url=dashboard.url, cookies={"kf_session": cookies["kf_session"]}) as client:
        assert client.get("/v1/jobs").status_code == 200
        refused = client.post("/v1/jobs", json=body)
        assert refused.status_code == 403 and "CSRF" in refused.json()["detail"]
        assert client.post("/v1/jobs", json=body, headers={"X-CSRF-Token": "0" * 64}).status_code == 403
        form_login = client.post("/ui/session", data={"token": dashboard.token})
        assert form_login.status_code == 422  # a cross-site form cannot log a browser in


def _stored_profile(dashboard: Dashboard, with_runs: bool) -> tuple[str, dict[str, Any]]:
    """A real CPU profile of the tiny GPT-2 (torch's profiler, as `profile-model --device cpu` takes it),
    stored through the API. With ``with_runs`` its torch.compile A/B, tuning and swap sections are
    filled in by the test (compiling and tuning are not what this page's test is about, and take minutes
    on CPU): the page must show what the stored report holds, whatever the numbers are."""
    pytest.importorskip("torch", reason="the model profiler needs the `profile` extra (torch)")
    pytest.importorskip("transformers", reason="the built-in models need the `profile` extra (transformers)")
    from kernelfarm.model_profiler.analysis import analyse
    from kernelfarm.model_profiler.capture import capture
    from kernelfarm.model_profiler.models import build
    from kernelfarm.worker.measuring.roofline import Ceilings

    mut = build("gpt2-tiny", dtype="float32", batch=1, seq=8, device="cpu")
    ceilings = Ceilings(dram_bytes_per_s=20e9, fp32_flops=100e9, tensor_flops=100e9, how="given by the test")
    report = analyse(capture(mut, warmup=1, iterations=1, trace_path=None), ceilings,
                     model="gpt2-tiny", dtype="float32", batch=1, seq=8)  # fmt: skip
    body = report.to_json()
    if with_runs:
        hot = report.operators[:2]
        body["compile_ab"] = {
            "eager_ms": report.latency_ms, "compiled_ms": report.latency_ms / 1.25, "speedup": 1.25, "compile_s": 12.5,
            "per_operator": [{"operator": hot[0].name, "eager_ms": hot[0].self_ms, "compiled_ms": 0.0}],
        }  # fmt: skip
        problems = [{"M": 8, "N": 64 * (i + 1), "K": 64} for i in range(len(hot))]
        body["tuning"] = [{
            "operator": op.name, "input_shapes": op.input_shapes, "family": "matmul", "problem": problem,
            "kernel": "matmul_fp32", "kernel_problem": problem, "calls": op.calls,
            "share": op.share, "baseline_ms": op.self_ms / op.calls, "tuned_ms": op.self_ms / op.calls / 2,
            "speedup": 2.0, "status": "tuned", "job_id": dashboard.finished_job,
            "estimated_end_to_end_ms": report.latency_ms * 0.8,
        } for op, problem in zip(hot, problems, strict=True)]  # fmt: skip
        fused = {"M": 8, "N": 256, "K": 64, "dtype": "bfloat16", "b_layout": "kn", "gelu": "tanh"}
        body["tuning"].append({  # an MLP's c_fc + GELU as one kernel: no share (timed in isolation, not a row)
            "operator": "c_fc + act", "input_shapes": [[8, 64]], "family": "matmul_bias_gelu", "problem": fused,
            "kernel": "matmul_bias_gelu_triton", "kernel_problem": fused, "calls": 2, "share": None,
            "baseline_ms": 0.2, "baseline_how": "c_fc + act timed in isolation", "modules": ["h.0.mlp", "h.1.mlp"],
            "tuned_ms": 0.05, "speedup": 4.0, "status": "tuned", "estimated_end_to_end_ms": report.latency_ms * 0.8,
        })  # fmt: skip
        body["swap"] = {"swapped": {f"{hot[0].name} M=8": ["h.0.mlp"]}, "profile_latency_ms": report.latency_ms,
                        "baseline_ms": report.latency_ms, "swapped_ms": report.latency_ms / 1.1, "speedup": 1.1,
                        "max_abs_error": 1e-5, "rel_l2_error": 1e-6, "outputs_match": True,
                        "reference": "a float32 copy of the model", "eager_rel_l2_vs_float32": 0.0123,
                        "swapped_rel_l2_vs_float32": 0.0111, "rel_l2_tolerance": 0.01845}  # fmt: skip
    with dashboard.client() as client:
        stored = client.post("/v1/profiles", json={"model": "gpt2-tiny", "device_name": report.device_name,
                                                   "dtype": "float32", "batch": 1, "seq": 8,
                                                   "latency_ms": report.latency_ms, "report": body})  # fmt: skip
    assert stored.status_code == 201, stored.text
    return stored.json()["id"], body


def test_model_profile_pages(dashboard: Dashboard, logged_in: Any) -> None:
    plain_id, plain = _stored_profile(dashboard, with_runs=False)
    full_id, full = _stored_profile(dashboard, with_runs=True)

    listing = visit(logged_in, dashboard, "/ui/profiles", "profiles")
    assert listing.locator("header nav a.active").inner_text() == "Profiles"
    for profile_id in (plain_id, full_id):
        row = listing.locator(f"tr[data-profile-id='{profile_id}']")
        assert row.count() == 1 and "gpt2-tiny" in row.inner_text() and "1 x 8" in row.inner_text()
    listing.click(f"tr[data-profile-id='{full_id}'] a")
    listing.wait_for_url(re.compile(rf"/ui/profiles/{full_id}$"))
    listing.close()

    page = visit(logged_in, dashboard, f"/ui/profiles/{full_id}", "profile")
    operators = page.locator("#operators tbody tr")
    assert operators.count() == len(full["operators"]) > 3
    for i, op in enumerate(full["operators"]):
        cells = operators.nth(i).locator("td")
        assert cells.nth(0).inner_text() == op["name"]
        assert int(cells.nth(2).inner_text()) == op["calls"]
        assert cells.nth(4).inner_text().strip() == f"{op['share'] * 100:.1f} %"
        assert float(cells.nth(5).inner_text()) == pytest.approx(op["tflops_per_s"], abs=0.006)
        assert cells.nth(7).inner_text() == op["bound"]
        assert cells.nth(10).inner_text() == (op["hint"] or "")
    assert sum(op["share"] for op in full["operators"]) == pytest.approx(1.0)
    assert page.locator("#model-hints li").count() == len(full["hints"])
    assert "1.25x" in page.inner_text("#compile-summary") and "12.5 s" in page.inner_text("#compile-summary")
    assert page.locator("#compile-ops tbody tr").count() == 1
    tuned = page.locator("#tuning-ops tbody tr")
    assert tuned.count() == 3 and "2.00x" in tuned.first.inner_text() and "tuned" in tuned.first.inner_text()
    assert tuned.first.locator(f"a[href='/ui/jobs/{dashboard.finished_job}']").count() == 1
    fused_cells = [tuned.nth(2).locator("td").nth(i).inner_text() for i in range(10)]
    assert [fused_cells[i] for i in (0, 2, 3)] == ["c_fc + act", "matmul_bias_gelu_triton", "tuned"]
    # the stored JSON's key order is the database's
    assert sorted(fused_cells[1].split(", ")) == ["K=64", "M=8", "N=256", "b_layout=kn", "dtype=bfloat16", "gelu=tanh"]
    assert fused_cells[5] == "" and "4.00x" in fused_cells[8]  # no share: not a row of the profile
    end_to_end = page.inner_text("#end-to-end")
    assert "(1.25x)" in end_to_end and "(1.10x)" in end_to_end and "match" in end_to_end
    assert "against a float32 copy of the model: relative L2 error swapped 0.0111, eager 0.0123 (bound 0.0185)" in (
        end_to_end
    )
    assert page.watch.problems == []
    page.close()

    bare = visit(logged_in, dashboard, f"/ui/profiles/{plain_id}", "profile-no-runs")
    assert bare.locator("#operators tbody tr").count() == len(plain["operators"])
    assert "profile-model --compile" in bare.inner_text("#compile-note")
    assert "profile-model --tune" in bare.inner_text("#tuning-note")
    assert bare.locator("#compile-summary").is_hidden() and bare.locator("#tuning-ops").is_hidden()
    assert bare.locator("#compile-ops-head").is_hidden()
    bare.close()


PAYLOAD = "<img src=x onerror=window.pwned=1>"
NO_INJECTION = "() => window.pwned === undefined && document.querySelectorAll('img[src=\"x\"], [onerror]').length === 0"


def _post_profile(dashboard: Dashboard, report: Any, model: str = "malformed", device_name: str = "cpu") -> str:
    """A profile stored through the API as any client with a submit token can: the report is free-form."""
    body = {"model": model, "device_name": device_name, "dtype": "float32", "batch": 1, "seq": 8,
            "latency_ms": 2.0, "report": report}  # fmt: skip
    with dashboard.client() as client:
        stored = client.post("/v1/profiles", json=body)
    assert stored.status_code == 201, stored.text
    return str(stored.json()["id"])


def test_a_hostile_profile_shows_as_text(dashboard: Dashboard, logged_in: Any) -> None:
    """Markup in every free-form text of a stored profile is shown as text, never parsed as HTML."""
    report = {
        "device": "cpu", "latency_ms": 2.0, "hints": [PAYLOAD],
        "operators": [{"name": PAYLOAD, "input_shapes": [[8, 64]], "calls": 2, "self_ms": 1.0, "share": 1.0,
                       "bound": PAYLOAD, "kernels": [PAYLOAD, f"{PAYLOAD}2"], "hint": PAYLOAD}],
        "compile_ab": {"eager_ms": 2.0, "compiled_ms": 1.0, "speedup": 2.0, "compile_s": 1.0,
                       "per_operator": [{"operator": PAYLOAD, "eager_ms": 1.0, "compiled_ms": 0.5}]},
        "tuning": [{"operator": PAYLOAD, "kernel": PAYLOAD, "status": PAYLOAD, "problem": {PAYLOAD: PAYLOAD},
                    "calls": 2, "share": 1.0, "baseline_ms": 1.0, "tuned_ms": 0.5, "speedup": 2.0,
                    "job_id": PAYLOAD}],
        "swap": {"swapped": {PAYLOAD: ["h.0"], f"{PAYLOAD} 2": ["h.1"]}, "baseline_ms": 2.0, "swapped_ms": 1.0,
                 "speedup": 2.0, "outputs_match": True, "max_abs_error": 0.0},
    }  # fmt: skip
    profile_id = _post_profile(dashboard, report, model=PAYLOAD, device_name=PAYLOAD)
    page = visit(logged_in, dashboard, f"/ui/profiles/{profile_id}", "profile-hostile")
    assert page.evaluate(NO_INJECTION)
    assert page.inner_text("#profile-title") == f"{PAYLOAD} on {PAYLOAD}"
    assert PAYLOAD in page.inner_text("#profile-summary [data-key='model']")
    assert PAYLOAD in page.inner_text("#profile-summary [data-key='device']")
    assert page.locator("#model-hints li").all_inner_texts() == [f"hint: {PAYLOAD}"]
    cells = page.locator("#operators tbody tr").first.locator("td")
    assert cells.nth(0).inner_text() == PAYLOAD and cells.nth(7).inner_text() == PAYLOAD
    assert cells.nth(9).inner_text() == f"{PAYLOAD}, {PAYLOAD}2" and cells.nth(10).inner_text() == PAYLOAD
    assert page.locator("#compile-ops tbody td").first.inner_text() == PAYLOAD
    tuned = page.locator("#tuning-ops tbody tr").first.locator("td")
    assert [tuned.nth(i).inner_text() for i in range(4)] == [PAYLOAD, f"{PAYLOAD}={PAYLOAD}", PAYLOAD, PAYLOAD]
    assert tuned.nth(9).inner_text() == PAYLOAD[:8]
    assert page.inner_text("#end-to-end [data-key='swapped']").endswith(f"{PAYLOAD}; {PAYLOAD} 2")
    listing = visit(logged_in, dashboard, "/ui/profiles", "profiles-hostile")
    assert PAYLOAD in listing.inner_text(f"tr[data-profile-id='{profile_id}']")
    assert listing.evaluate(NO_INJECTION)
    for shown in (page, listing):
        assert shown.watch.problems == []
        shown.close()


# Reports of the wrong shape in every field the page reads: what is readable shows, the rest is skipped.
MALFORMED = {
    "odd fields": {
        "hints": "one hint as a string", "ceilings": "fast", "profiled_ms": "soon", "compile_ab": [1],
        "operators": [
            {"name": "op_ok", "input_shapes": ["8x64", [1, 8], None, {"a": 1}], "kernels": [123, "kern_ok", None, {}],
             "calls": {"x": 1}, "share": "big", "hint": ["x"], "bound": 5, "self_ms": "1"},
            "not an operator", None, [1, 2],
        ],
        "tuning": [{"operator": "tuned_op", "job_id": 12345, "problem": "M=8", "kernel": 7, "status": None,
                    "speedup": "2x", "estimated_end_to_end_ms": 0}, "junk", None],
        "swap": {"swapped": ["a", 1, None], "baseline_ms": "x", "max_abs_error": "small"},
    },
    "wrong containers": {"operators": {"name": "x"}, "hints": {"a": 1}, "tuning": "yes", "swap": "x", "compile_ab": 1},
}  # fmt: skip


def test_a_malformed_profile_still_renders(dashboard: Dashboard, logged_in: Any) -> None:
    odd = visit(
        logged_in, dashboard, f"/ui/profiles/{_post_profile(dashboard, MALFORMED['odd fields'])}", "profile-odd"
    )
    assert odd.locator("#error").is_hidden()
    assert odd.inner_text("#profile-title") == "malformed on cpu"
    assert odd.locator("#model-hints li").all_inner_texts() == ["hint: one hint as a string"]
    rows = odd.locator("#operators tbody tr")
    assert rows.count() == 1
    cells = rows.first.locator("td")
    assert [cells.nth(i).inner_text() for i in (0, 1, 2, 3, 9, 10)] == ["op_ok", "8x64 1x8", "", "", "123, kern_ok", ""]
    assert "not readable" in odd.inner_text("#compile-note")
    tuned = odd.locator("#tuning-ops tbody tr")
    assert tuned.count() == 1 and tuned.first.locator("td").first.inner_text() == "tuned_op"
    assert tuned.first.locator("td").nth(2).inner_text() == "7"
    assert tuned.first.locator("a[href='/ui/jobs/12345']").inner_text() == "12345"
    assert odd.inner_text("#end-to-end [data-key='swapped']").endswith("a; 1")
    assert odd.watch.problems == []
    odd.close()

    wrong = visit(logged_in, dashboard, f"/ui/profiles/{_post_profile(dashboard, MALFORMED['wrong containers'])}",
                  "profile-wrong-containers")  # fmt: skip
    assert wrong.locator("#error").is_hidden()
    assert wrong.inner_text("#profile-title") == "malformed on cpu"
    assert wrong.inner_text("#operators-note") == "no operator in this report"
    assert wrong.locator("#model-hints li").count() == 0
    assert "not readable" in wrong.inner_text("#tuning-note") and "not readable" in wrong.inner_text("#compile-note")
    assert wrong.watch.problems == []
    wrong.close()

    # A report that is not an object at all (the API stores only objects; an answer altered on the way, or
    # an older server, could still send one): the header shows.
    profile_id = _post_profile(dashboard, {"hints": ["kept"]})
    for report in (None, "a string", [1, 2]):
        page = logged_in.new_page()
        watch = PageWatch(page)

        page.route(f"**/v1/profiles/{profile_id}", _with_report(report))
        page.goto(f"{dashboard.url}/ui/profiles/{profile_id}")
        page.wait_for_selector("body[data-rendered='1']", timeout=30_000)
        assert page.inner_text("#profile-title") == "malformed on cpu", report
        assert "2.000 ms per inference" in page.inner_text("#profile-summary [data-key='latency']")
        assert page.inner_text("#operators-note") == "no operator in this report"
        assert page.locator("#error").is_hidden() and watch.problems == [], (report, watch.problems)
        page.close()


def _with_report(report: Any) -> Any:
    """A route handler: the API's answer with its report replaced by ``report``."""

    def altered(route: Any) -> None:
        answer = route.fetch()
        route.fulfill(response=answer, json={**answer.json(), "report": report})

    return altered


def test_the_csv_download_reports_a_failed_load(dashboard: Dashboard, logged_in: Any) -> None:
    """When loading every trial fails, the CSV button says why instead of waiting for ever."""
    page = logged_in.new_page()
    watch = PageWatch(page)
    downloads: list[Any] = []
    page.on("download", lambda d: downloads.append(d))  # (Playwright cannot detach a builtin method)
    every_trial = f"/v1/jobs/{dashboard.finished_job}/trial-columns"
    page.route(lambda url: url.endswith(every_trial),
               lambda route: route.fulfill(status=503, json={"detail": "every trial: unavailable (test)"}))  # fmt: skip
    page.goto(f"{dashboard.url}/ui/jobs/{dashboard.finished_job}")
    page.wait_for_selector("body[data-rendered='1']", timeout=30_000)
    page.wait_for_selector("#error:not([hidden])", timeout=30_000)  # the page's own poll says so first
    assert page.locator("#error .action-error").count() == 0
    page.click("#csv")  # an action: its error is a line of its own, kept until dismissed
    page.wait_for_selector("#error .action-error", timeout=10_000)
    assert page.inner_text("#error .action-error .text") == "every trial: unavailable (test)"
    assert downloads == []
    # The one failure is the refused request (as the console and the response log it): no uncaught error.
    assert [p for p in watch.problems if "503" not in p] == [], watch.problems
    page.close()


def test_the_form_sends_the_objective(dashboard: Dashboard, logged_in: Any) -> None:
    """Issue 17's energy objective from the dashboard (it was reachable by raw HTTP alone)."""
    page = visit(logged_in, dashboard, "/ui/new", "new-job-form")
    page.select_option("#kernel", "convolution_kernel")
    page.fill("#gpu_model", RTX3090)
    page.fill("#budget_trials", "4")
    assert page.locator("#objective option").all_inner_texts() == [
        "time", "energy per launch", "time and energy (Pareto front)"
    ]  # fmt: skip
    page.select_option("#objective", "time+energy")
    page.click("#submit")
    page.wait_for_url(re.compile(r"/ui/jobs/[0-9a-f-]{36}$"))
    job_id = page.url.rsplit("/", 1)[1]
    job, _ = _job_data(dashboard, job_id)
    assert job["objective"] == "time+energy" and job["warm_start"] is True
    assert page.watch.problems == []
    with dashboard.client() as client:
        client.post(f"/v1/jobs/{job_id}/cancel")
    page.close()
