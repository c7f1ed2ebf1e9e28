"""Every dashboard page in a real Chromium: loads with zero console errors and zero failed requests,
shows the farm's data, and is screenshotted (see conftest.py for where)."""

from __future__ import annotations

import csv
import io
import re
import statistics
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.conftest import RTX3090
from tests.ui.conftest import Dashboard


class PageWatch:
    """Console errors, uncaught exceptions and failed requests of one page."""

    def __init__(self, page: Any) -> None:
        self.page = page
        self.problems: list[str] = []
        page.on("console", lambda m: m.type == "error" and self.problems.append(f"console: {m.text}"))
        page.on("pageerror", lambda e: self.problems.append(f"exception: {e}"))
        page.on("requestfailed", lambda r: self.problems.append(f"request failed: {r.url} {r.failure}"))
        page.on("response", lambda r: r.status >= 400 and self.problems.append(f"HTTP {r.status}: {r.url}"))


@pytest.fixture(scope="module")
def logged_in(dashboard: Dashboard, chromium: Any) -> Iterator[Any]:
    """A browser context logged in through the login form (the cookies are then reused)."""
    context = chromium.new_context(viewport={"width": 1400, "height": 1000})
    page = context.new_page()
    watch = PageWatch(page)
    page.goto(f"{dashboard.url}/ui/jobs")
    assert "/ui/login" in page.url  # no session yet
    page.fill("#token", dashboard.token)
    page.click("button[type=submit]")
    page.wait_for_url(re.compile(r"/ui/jobs"))
    page.wait_for_selector("body[data-rendered='1']")
    assert watch.problems == []
    cookies = {c["name"]: c for c in context.cookies()}
    assert cookies["kf_session"]["httpOnly"] and cookies["kf_session"]["sameSite"] == "Strict"
    page.close()
    yield context
    context.close()


# The job page's render is complete (every plot above the fold, the last after Plotly's full bundle) and
# the two plots drawn on scrolling into view are drawn.
LAZY_PLOTS_DRAWN = """() => document.body.dataset.complete === '1' &&
  document.getElementById('parcoords-note').textContent !== '' &&
  (document.getElementById('roofline').data !== undefined || !document.getElementById('roofline-note').hidden)"""


def visit(context: Any, dashboard: Dashboard, path: str, shot: str, ready: str = "body[data-rendered='1']") -> Any:
    page = context.new_page()
    watch = PageWatch(page)
    page.goto(f"{dashboard.url}{path}")
    page.wait_for_selector(ready, timeout=30_000)
    if page.locator("#parcoords").count():  # the job page draws these two when they scroll into view
        page.locator("#parcoords").scroll_into_view_if_needed()
        page.locator("#topk").scroll_into_view_if_needed()
        page.wait_for_function(LAZY_PLOTS_DRAWN, timeout=60_000)
    page.wait_for_load_state("networkidle")
    page.screenshot(path=str(dashboard.artifacts / f"{shot}.png"), full_page=True)
    assert watch.problems == [], f"{path}: {watch.problems}"
    page.watch = watch  # the caller may act on the page and check again
    return page


def test_a_browser_without_a_session_sees_no_page(dashboard: Dashboard, chromium: Any) -> None:
    context = chromium.new_context()
    page = context.new_page()
    for path in ("/ui/jobs", f"/ui/jobs/{dashboard.finished_job}", "/ui/new", "/ui/kernels", "/ui/fleet"):
        page.goto(f"{dashboard.url}{path}")
        assert re.search(r"/ui/login\?next=", page.url), path
        assert page.locator("#jobs, #summary, #new-job, #kernel-list, #models").count() == 0
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

    best_line = page.evaluate("document.getElementById('conv-evals').data[0].y")
    assert best_line[-1] == pytest.approx(job["best"]["time_ms"])
    assert best_line == sorted(best_line, reverse=True)  # best so far never gets worse
    scatter = page.evaluate("document.getElementById('all-trials').data[0]")
    assert sorted(scatter["y"]) == pytest.approx(sorted(t["time_ms"] for t in complete))

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
    assert page.watch.problems == []
    page.close()


def test_a_job_started_from_the_form_runs_to_completion(dashboard: Dashboard, logged_in: Any) -> None:
    page = visit(logged_in, dashboard, "/ui/new", "new-job-form")
    page.select_option("#kernel", "convolution_kernel")
    page.fill("#gpu_model", RTX3090)
    page.select_option("#strategy", "random")
    page.fill("#budget_trials", "12")
    page.fill("#seed", "3")
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
