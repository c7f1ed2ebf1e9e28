"""A second outside probe of the dashboard, in a real Chromium against a real API: times that are not
numbers (PostgreSQL writes a NaN or infinite float as the JSON string "NaN" or "Infinity") and a trial
without one of its kernel's parameters, each of which stopped every plot after the first view; a logout
the farm refused that went to the login page all the same, its session still alive; and a login, or a
session's end, that lost the query of the page the user was on. And the Content-Security-Policy each
page is sent, which none of them violates."""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import quote

import httpx

from tests.conftest import make_token
from tests.ui.conftest import Dashboard, PageWatch, logged_in_as, visit
from tests.ui.test_page_hardening import StoredTrial, convolution_config, store_finished_job

ERROR_SHOWN = "document.getElementById('error').hidden === false"


# ---------------------------------------------------------------- A: times that are not numbers
def test_times_that_are_not_numbers_leave_every_plot_drawn(dashboard: Dashboard, logged_in: Any) -> None:
    """A complete trial timed NaN, one timed infinity, and one stored without block_size_x (a row older than
    its kernel's space): the page threw (value.toPrecision is not a function; z[NaN] undefined) after its
    first view, so no Plotly plot was drawn and the banner showed a TypeError."""
    missing = {k: v for k, v in convolution_config(block_size_y=2).items() if k != "block_size_x"}
    trials = [StoredTrial(convolution_config(block_size_x=1), time_ms=float("nan")),
              StoredTrial(convolution_config(block_size_x=2), time_ms=float("inf")),
              StoredTrial(convolution_config(block_size_x=4), time_ms=2.0),
              StoredTrial(missing, time_ms=1.5),
              StoredTrial(convolution_config(block_size_x=8), time_ms=1.0)]  # fmt: skip
    job_id = store_finished_job(dashboard.farm.database_url, trials)
    with dashboard.client() as client:  # what the page is given: the times as strings
        assert client.get(f"/v1/jobs/{job_id}/trial-columns").json()["time_ms"] == ["NaN", "Infinity", 2.0, 1.5, 1.0]
    page = visit(logged_in, dashboard, f"/ui/jobs/{job_id}", "job-times-not-numbers")
    assert page.locator("#error").is_hidden(), page.inner_text("#error")
    scatter = page.evaluate("document.getElementById('all-trials').data[0]")
    assert (scatter["x"], scatter["y"]) == ([2, 3, 4], [2.0, 1.5, 1.0])
    assert page.evaluate("document.getElementById('heatmap').dataset.cells") == "2"  # the trial without x has no cell
    assert page.evaluate("document.getElementById('parcoords').data[0].dimensions.at(-1).values") == [2.0, 1.5, 1.0]
    assert page.evaluate("document.getElementById('conv-evals').kfSeries.y") == [2.0, 1.5, 1.0]
    shown = [page.locator(f"#trials tr[data-seq='{seq}'] td").nth(3).inner_text() for seq in range(5)]
    assert shown == ["", "", "2.000", "1.500", "1.000"]
    page.close()

    # A job whose only time is NaN: its first view (the API's curve, whose best is null there) drew a point
    # at 0 ms; the page now says what a job with no time says.
    only_nan = [StoredTrial(convolution_config(), time_ms=float("nan"))]
    nan_only = store_finished_job(dashboard.farm.database_url, only_nan)
    page = visit(logged_in, dashboard, f"/ui/jobs/{nan_only}", "job-only-nan")
    assert page.locator("#error").is_hidden(), page.inner_text("#error")
    for plot in ("#conv-evals", "#conv-time"):
        assert page.get_attribute(f"{plot} svg", "aria-label") == "no trial succeeded"
    assert page.evaluate("document.getElementById('all-trials').data[0].y") == []
    page.close()


# ---------------------------------------------------------------- B: a refused logout
def test_a_refused_logout_says_so_and_keeps_the_page(dashboard: Dashboard, chromium: Any) -> None:
    """The CSRF cookie replaced (another page on the host can plant one, docs/SECURITY.md): the farm
    refuses the logout (403), and the page used to go to the login as if it had ended the session."""
    token = make_token(dashboard.farm.database_url, "read", name="ui-logout-refused")
    context = logged_in_as(chromium, dashboard, token)
    page = visit(context, dashboard, "/ui/jobs", "jobs-before-logout")
    csrf = next(c for c in context.cookies() if c["name"] == "kf_csrf")
    context.add_cookies([{**csrf, "value": "0" * 64}])
    page.click("#logout")
    page.wait_for_function(ERROR_SHOWN, timeout=10_000)
    message = page.inner_text("#error")
    assert "not logged out" in message and "X-CSRF-Token" in message, message
    page.wait_for_timeout(300)
    assert page.url.endswith("/ui/jobs")
    assert context.request.get(f"{dashboard.url}/v1/jobs").status == 200  # the session lives: the page says so
    page.screenshot(path=str(dashboard.artifacts / "logout-refused.png"))

    assert [p for p in page.watch.problems if "403" not in p] == [], page.watch.problems
    before = len(page.watch.problems)
    context.add_cookies([csrf])  # the right value back: the logout ends the session and goes to the login
    page.click("#logout")
    page.wait_for_url(re.compile(r"/ui/login$"), timeout=10_000)
    assert context.request.get(f"{dashboard.url}/v1/jobs").status == 401
    # Going to the login aborts the list's poll if one is in flight (a fresh clone's run saw it): only that.
    after = page.watch.problems[before:]
    assert [p for p in after if "403" not in p and not p.endswith("net::ERR_ABORTED")] == [], after
    page.close()
    context.close()


# ---------------------------------------------------------------- C: back to the page with its query
def test_the_login_and_a_revoked_session_keep_the_pages_query(dashboard: Dashboard, chromium: Any) -> None:
    """A shared link to a filtered job list, opened without a session, led after the login to the whole list;
    a session ended while a filtered page was open sent the user to a login that forgot the filter too."""
    filtered = "/ui/jobs?state=running&owner=ui-user"
    context = chromium.new_context()
    page = context.new_page()
    watch = PageWatch(page)
    page.goto(f"{dashboard.url}{filtered}")
    assert page.url == f"{dashboard.url}/ui/login?next={quote(filtered, safe='/')}"
    page.fill("#token", dashboard.token)
    page.click("button[type=submit]")
    page.wait_for_url(f"{dashboard.url}{filtered}")
    page.wait_for_selector("body[data-rendered='1']")
    assert page.input_value("select[name=state]") == "running" and page.input_value("input[name=owner]") == "ui-user"
    rows = page.locator("#jobs tbody tr[data-job-id]")
    assert rows.count() == 1 and rows.first.get_attribute("data-job-id") == dashboard.running_job
    assert watch.problems == []
    page.close()
    context.close()

    # The session's token revoked while the page polls: the next poll lands on the login, the query kept.
    token = make_token(dashboard.farm.database_url, "read", name="ui-revoked-while-open")
    admin = make_token(dashboard.farm.database_url, "admin", name="ui-revoker")
    context = logged_in_as(chromium, dashboard, token)
    page = visit(context, dashboard, filtered, "jobs-filtered-before-revocation")
    with httpx.Client(base_url=dashboard.url, headers={"Authorization": f"Bearer {admin}"}, timeout=30) as client:
        (revoked,) = [t["id"] for t in client.get("/v1/tokens").json() if t["name"] == "ui-revoked-while-open"]
        assert client.delete(f"/v1/tokens/{revoked}").status_code == 200
    page.wait_for_url(re.compile(r"/ui/login\?"), timeout=15_000)
    assert page.url == f"{dashboard.url}/ui/login?next={quote(filtered, safe='')}"
    assert page.get_attribute("body", "data-next") == filtered
    page.close()
    context.close()


# ---------------------------------------------------------------- D: the policy each page is sent
# Every Content-Security-Policy violation of a page (the browser blocks the thing and says so here only).
RECORD_VIOLATIONS = """window.kfViolations = [];
document.addEventListener('securitypolicyviolation', (e) =>
  window.kfViolations.push(`${e.violatedDirective} ${e.blockedURI} ${e.sourceFile}:${e.lineNumber}`));"""


def test_every_page_works_within_its_policy(dashboard: Dashboard, chromium: Any) -> None:
    """The Content-Security-Policy as the farm sends it: same origin only, no inline script; no page meets a
    violation of it (the browser would block the thing in silence, but for this event) or asks for anything
    from another origin (GPU nodes are air-gapped). 'unsafe-eval' stays: Plotly's WebGL traces need it
    (without it, Chromium blocks eval in plotly.min.js on the job page), and so does Playwright's
    wait_for_function, which evaluates its predicate in the page."""
    with dashboard.client() as client:
        stored = client.post("/v1/profiles", json={"model": "csp", "device_name": "cpu", "dtype": "float32",
                                                   "batch": 1, "seq": 8, "latency_ms": 2.0, "report": {}})  # fmt: skip
    assert stored.status_code == 201, stored.text
    context = logged_in_as(chromium, dashboard, dashboard.token)
    context.add_init_script(RECORD_VIOLATIONS)
    requested: list[str] = []
    context.on("request", lambda r: requested.append(r.url))
    profile = f"/ui/profiles/{stored.json()['id']}"
    for path in ("/ui/jobs", "/ui/new", "/ui/kernels", "/ui/fleet", "/ui/profiles", profile,
                 f"/ui/jobs/{dashboard.finished_job}"):  # fmt: skip
        policy = context.request.get(f"{dashboard.url}{path}").headers["content-security-policy"]
        assert policy.startswith("default-src 'self'; script-src 'self' 'unsafe-eval';"), (path, policy)
        assert "'unsafe-inline'" not in policy.split("script-src")[1].split(";")[0], policy
        assert "frame-ancestors 'none'" in policy and "object-src 'none'" in policy, policy
        page = visit(context, dashboard, path, f"csp-{path.strip('/').replace('/', '-')}")
        assert page.evaluate("window.kfViolations") == [], path
        page.close()
    assert requested and all(u.startswith(f"{dashboard.url}/") for u in requested), requested
    context.close()
    anonymous = chromium.new_context()
    page = anonymous.new_page()
    page.add_init_script(RECORD_VIOLATIONS)
    page.goto(f"{dashboard.url}/ui/login")
    page.wait_for_load_state("networkidle")
    assert page.evaluate("window.kfViolations") == []
    page.close()
    anonymous.close()
