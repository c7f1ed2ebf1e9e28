"""Dashboard sessions (api/session.py, core/store/ui_sessions.py), over HTTP against real API
processes: the cookie holds a session's secret, not the API token; logging out ends the session in
every API process; the server enforces the session's age; and no other site can log a user out."""

from __future__ import annotations

import httpx
import pytest
from sqlalchemy import update

from kernelfarm.api.session import csrf_for
from kernelfarm.core.db import session_scope
from kernelfarm.core.models import UiSession
from kernelfarm.core.store.tokens import hash_token
from tests.api.conftest import client_for
from tests.conftest import Farm, make_token, wait_for


def login(farm: Farm, token: str) -> str:
    """The session cookie's value after a login."""
    with httpx.Client(base_url=farm.api_url) as client:
        answer = client.post("/ui/session", json={"token": token})
        assert answer.status_code == 204, answer.text
        return answer.cookies["kf_session"]


def with_cookie(farm: Farm, secret: str) -> httpx.Client:
    return httpx.Client(base_url=farm.api_url, cookies={"kf_session": secret}, timeout=30)


def test_the_cookie_is_a_session_not_the_token(api_only: Farm, database_url: str) -> None:
    token = make_token(database_url, "admin", name="sessions-admin")
    secret = login(api_only, token)
    assert secret != token and token not in secret and secret.startswith("kfs_")
    with with_cookie(api_only, secret) as browser:
        assert browser.get("/v1/tokens").status_code == 200
    # Another service on the host gets the cookie (browsers do not separate ports): it is no API token
    assert client_for(api_only, secret).get("/v1/tokens").status_code == 401


def test_logging_out_ends_the_session_in_every_api_process(api_only: Farm, second_api: Farm, database_url: str) -> None:
    secret = login(api_only, make_token(database_url, "read", name="sessions-reader"))
    browsers = [with_cookie(api_only, secret), with_cookie(second_api, secret)]
    for browser in browsers:  # both processes have the session cached now
        for _ in range(3):
            assert browser.get("/v1/jobs").status_code == 200

    # Another site's form comes without the cookie (SameSite=Strict): nothing ends, no cookie is dropped
    with httpx.Client(base_url=api_only.api_url) as foreign:
        answer = foreign.post("/ui/logout")
        assert answer.status_code == 204 and "set-cookie" not in answer.headers
    without_header = browsers[0].post("/ui/logout")
    assert without_header.status_code == 403 and "set-cookie" not in without_header.headers
    assert browsers[0].get("/v1/jobs").status_code == 200

    out = browsers[0].post("/ui/logout", headers={"X-CSRF-Token": csrf_for(secret)})
    assert out.status_code == 204 and "kf_session=" in out.headers["set-cookie"]
    for browser in browsers:  # the copy the browser kept (or a thief) is refused everywhere within a second

        def refused(b: httpx.Client = browser) -> bool:
            return b.get("/v1/jobs").status_code == 401

        wait_for(refused, 2, "the ended session to be refused")
        answer = browser.get("/v1/jobs")
        assert answer.status_code == 401 and "session has ended" in answer.json()["detail"]
        page = browser.get("/ui/jobs", follow_redirects=False)
        assert page.status_code == 303 and "/ui/login" in page.headers["location"]
        browser.close()


def test_the_server_ends_a_session_at_its_age_and_with_its_token(api_only: Farm, database_url: str) -> None:
    admin = client_for(api_only, make_token(database_url, "admin", name="sessions-root"))
    created = admin.post("/v1/tokens", json={"name": "sessions-user", "scopes": ["read"]}).json()
    aged, revoked = login(api_only, created["token"]), login(api_only, created["token"])
    with with_cookie(api_only, aged) as browser:
        assert browser.get("/v1/jobs").status_code == 200  # cached in the API process now
        with session_scope(database_url) as session:  # the browser would still send it: its Max-Age is its own
            session.execute(update(UiSession).where(UiSession.secret_hash == hash_token(aged))
                            .values(expires_at=UiSession.created_at))  # fmt: skip
        # refused once the process's cached credential is older than token_cache_seconds (10 s)
        wait_for(lambda: browser.get("/v1/jobs").status_code == 401, 15, "the expired session to be refused")
    with with_cookie(api_only, revoked) as browser:
        assert browser.get("/v1/jobs").status_code == 200
        assert admin.delete(f"/v1/tokens/{created['id']}").status_code == 200
        wait_for(lambda: browser.get("/v1/jobs").status_code == 401, 2, "a revoked token's session to be refused")


@pytest.mark.parametrize("path", ["/ui/jobs/not-a-uuid", "/ui/jobs/" + "a" * 34, "/ui/profiles/%3Cb%3E"])
def test_a_page_of_no_id_says_so(api_only: Farm, path: str) -> None:
    """It answered the API's JSON (422); a 34-digit "id" got a page that polled a 422 every 2 s, forever."""
    with httpx.Client(base_url=api_only.api_url) as browser:
        page = browser.get(path, follow_redirects=False)
    assert page.status_code == 404 and page.headers["content-type"].startswith("text/html")
    assert "is not a " in page.text and " id (ids look like " in page.text and "<b>" not in page.text


def test_the_login_page_escapes_where_it_goes_next(api_only: Farm) -> None:
    with httpx.Client(base_url=api_only.api_url) as browser:
        page = browser.get("/ui/login", params={"next": "/ui/jobs?a=&quot&lt&gt"})
    assert 'data-next="/ui/jobs?a=&amp;quot&amp;lt&amp;gt"' in page.text
