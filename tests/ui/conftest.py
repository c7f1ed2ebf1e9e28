"""The dashboard in a real browser: Playwright driving Debian's Chromium against a real farm (API,
coordinator, replay workers, PostgreSQL, Redis) with a finished job and a running one.

Playwright's own browser download cannot work on these machines; the tests launch the system's
Chromium (`apt-get install chromium`; .ci/run installs it when missing) and skip, saying why, where
there is none. Screenshots of every page land in ``<pytest basetemp>/ui-screenshots0/`` (or in
``$KERNELFARM_UI_ARTIFACTS`` when set): test artifacts, never committed.
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

from kernelfarm import kernels as kernel_package
from tests.conftest import RTX3090, Farm, live_worker_count, make_token, wait_for

H100 = "nvidia-h100-80gb-hbm3"
CHROMIUM_CANDIDATES = ("chromium", "chromium-browser", "google-chrome")


def chromium_path() -> str | None:
    for name in CHROMIUM_CANDIDATES:
        found = shutil.which(name)
        if found:
            return found
    return None


# Module scope: a running sync Playwright holds an asyncio loop in this thread, and every later test in
# the same process calling asyncio.run failed with "cannot be called from a running event loop" (under
# pytest-xdist a worker runs other folders' tests after these).
@pytest.fixture(scope="module")
def chromium() -> Iterator[Any]:
    path = chromium_path()
    if path is None:
        pytest.skip("no Chromium on this machine (apt-get install chromium; `make test` does it when run as root)")
    sync_api = pytest.importorskip(
        "playwright.sync_api", reason="playwright is not installed (pip install -e '.[dev]')"
    )
    with sync_api.sync_playwright() as playwright:
        # --no-sandbox: Chromium refuses to start as root with its sandbox (CI runs as root).
        browser = playwright.chromium.launch(
            executable_path=path, headless=True,
            args=["--no-sandbox", "--use-angle=swiftshader", "--enable-unsafe-swiftshader"],
        )  # fmt: skip
        yield browser
        browser.close()


@pytest.fixture(scope="session")
def artifacts(tmp_path_factory: pytest.TempPathFactory) -> Path:
    chosen = os.environ.get("KERNELFARM_UI_ARTIFACTS")
    if chosen:
        Path(chosen).mkdir(parents=True, exist_ok=True)
        return Path(chosen)
    return tmp_path_factory.mktemp("ui-screenshots")


@dataclass
class Dashboard:
    farm: Farm
    token: str  # submit scope: can start jobs from the form
    finished_job: str
    running_job: str
    artifacts: Path
    storage: dict[str, Any] = field(default_factory=dict)  # the logged-in browser's cookies

    @property
    def url(self) -> str:
        return self.farm.api_url

    def client(self) -> httpx.Client:
        return httpx.Client(base_url=self.url, headers={"Authorization": f"Bearer {self.token}"}, timeout=30)


def softmax_landscape() -> Path:
    """A recorded H100 landscape shipped in the package (its default problem)."""
    return Path(kernel_package.__file__).parent / "softmax" / "landscapes" / f"{H100}_M8192_N4096_dtypefloat32.json.gz"


@pytest.fixture(scope="module")
def dashboard(farm: Farm, artifacts: Path, chromium: Any) -> Iterator[Dashboard]:
    """The module's farm plus a slow H100 replay worker; one finished job (RTX 3090 convolution) and one
    that keeps running (H100 softmax, one trial at a time, 1.5 s each) for the module's duration."""
    farm.start_worker("slow-h100", softmax_landscape(), sleep_ms=1500)
    wait_for(lambda: farm.check_running() and live_worker_count(farm.database_url, H100) >= 1, 60, "the H100 worker")
    token = make_token(farm.database_url, "submit", name="ui-user")
    client = httpx.Client(base_url=farm.api_url, headers={"Authorization": f"Bearer {token}"}, timeout=30)
    finished = client.post("/v1/jobs", json={"kernel": "convolution_kernel", "gpu_model": RTX3090, "budget_trials": 40,
                                             "parallelism": 4, "seed": 11, "strategy": "random"})  # fmt: skip
    assert finished.status_code == 201, finished.text
    running = client.post("/v1/jobs", json={"kernel": "softmax", "gpu_model": H100, "budget_trials": 200,
                                            "parallelism": 1, "seed": 5, "strategy": "random"})  # fmt: skip
    assert running.status_code == 201, running.text
    finished_id, running_id = finished.json()["id"], running.json()["id"]
    wait_for(lambda: client.get(f"/v1/jobs/{finished_id}").json()["state"] == "complete", 120, "the finished job")
    wait_for(lambda: client.get(f"/v1/jobs/{running_id}").json()["progress"]["complete"] >= 2, 60, "the running job")
    yield Dashboard(farm, token, finished_id, running_id, artifacts)
    client.post(f"/v1/jobs/{running_id}/cancel")
    client.close()


class PageWatch:
    """Console errors, uncaught exceptions and failed requests of one page."""

    def __init__(self, page: Any) -> None:
        self.page = page
        self.problems: list[str] = []
        page.on("console", self._console)
        page.on("pageerror", lambda e: self.problems.append(f"exception: {e}"))
        page.on("requestfailed", lambda r: self.problems.append(f"request failed: {r.url} {r.failure}"))
        page.on("response", self._response)

    def _console(self, message: Any) -> None:
        if message.type == "error":
            self.problems.append(f"console: {message.text}")

    def _response(self, response: Any) -> None:
        if response.status >= 400:
            self.problems.append(f"HTTP {response.status}: {response.url}")


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


def logged_in_as(chromium: Any, dashboard: Dashboard, token: str, width: int = 1400) -> Any:
    """A new browser context ``width`` pixels wide with a session of ``token`` (the login's own request, without
    its form)."""
    context = chromium.new_context(viewport={"width": width, "height": 1000})
    answer = context.request.post(f"{dashboard.url}/ui/session", data={"token": token})
    assert answer.status == 204, answer.text()
    return context
