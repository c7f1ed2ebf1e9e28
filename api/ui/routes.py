"""Dashboard routes: the login exchange, the page shells and the static assets."""

from __future__ import annotations

import html
import re
from collections.abc import Iterable
from functools import cache
from importlib.resources import files
from string import Template
from urllib.parse import quote

from fastapi import APIRouter, FastAPI, Request, Response, status
from fastapi.responses import FileResponse, HTMLResponse, RedirectResponse
from fastapi.staticfiles import StaticFiles

from kernelfarm.api.deadline import in_thread
from kernelfarm.api.deps import SettingsDep, principal_for, request_credential
from kernelfarm.api.session import (
    CSRF_HEADER,
    SESSION_COOKIE,
    SESSION_MAX_AGE_S,
    clear_session_cookies,
    csrf_ok,
    set_session_cookies,
)
from kernelfarm.api.strict_json import loads_strict
from kernelfarm.api.token_cache import TokenCache
from kernelfarm.core.db import session_scope
from kernelfarm.core.errors import Forbidden, InvalidInput, KernelfarmError
from kernelfarm.core.store import ui_sessions
from kernelfarm.core.store.tokens import Scope, authenticate, effective_scopes

UI_ROOT = files("kernelfarm.api.ui")
# Page name → (title, script module, nav entry it belongs to).
PAGES: dict[str, tuple[str, str, str]] = {
    "jobs": ("Jobs", "jobs.js", "jobs"),
    "job": ("Job", "job.js", "jobs"),
    "new": ("New job", "new_job.js", "new"),
    "kernels": ("Kernels", "kernels.js", "kernels"),
    "fleet": ("Fleet", "fleet.js", "fleet"),
    "profiles": ("Model profiles", "profiles.js", "profiles"),
    "profile": ("Model profile", "profile.js", "profiles"),
}
NAV = (("jobs", "/ui/jobs", "Jobs"), ("new", "/ui/new", "New job"), ("kernels", "/ui/kernels", "Kernels"),
       ("fleet", "/ui/fleet", "Fleet"), ("profiles", "/ui/profiles", "Profiles"))  # fmt: skip
# Pages and their scripts: same-origin only. Plotly's WebGL traces (parcoords, scattergl) build shader
# glue with new Function, hence 'unsafe-eval'; its styles are set inline, hence 'unsafe-inline' styles.
CSP = ("default-src 'self'; script-src 'self' 'unsafe-eval'; style-src 'self' 'unsafe-inline'; "
       "img-src 'self' data: blob:; connect-src 'self'; frame-ancestors 'none'; form-action 'self'; "
       "base-uri 'none'; object-src 'none'")  # fmt: skip
PAGE_HEADERS = {"Content-Security-Policy": CSP, "Cache-Control": "no-store", "X-Content-Type-Options": "nosniff",
                "Referrer-Policy": "same-origin"}  # fmt: skip
SAFE_NEXT = re.compile(r"^/ui/[A-Za-z0-9/_\-.?=&%+]*$")
MODULE_IMPORT = re.compile(r'^import [^;]* from "\./([\w.-]+\.js)";', re.MULTILINE)

router = APIRouter(prefix="/ui", include_in_schema=False)


@cache
def _template(name: str) -> Template:
    return Template((UI_ROOT / "pages" / name).read_text(encoding="utf-8"))


@cache
def _module_imports(script: str) -> tuple[str, ...]:
    """The modules a page's script imports (static/js/, one level): preloaded with it, so the browser
    fetches them in parallel instead of after parsing the page's script."""
    source = (UI_ROOT / "static" / "js" / script).read_text(encoding="utf-8")
    return tuple(MODULE_IMPORT.findall(source))


def _plotly_path() -> str:
    return str(files("plotly") / "package_data" / "plotly.min.js")


def _plotly_cartesian_path() -> str:
    return str(UI_ROOT / "vendor" / "plotly-cartesian.min.js")


def _html(body: str) -> HTMLResponse:
    return HTMLResponse(body, headers=PAGE_HEADERS)


def render_page(
    page: str,
    user: str,
    scopes: Iterable[Scope],
    data: dict[str, str] | None = None,
    prefetch: tuple[str, ...] = (),
) -> HTMLResponse:
    """The page's shell. ``scopes``: the session's (effective), written as ``data-scopes`` so that a
    page offers only the actions its session may take (static/js/api.js, sessionMay); the API still
    checks each one. ``prefetch``: API paths the page's script asks for first, preloaded from the head
    so their answers are on the way while the browser fetches and runs the script."""
    title, script, section = PAGES[page]
    data = {"scopes": " ".join(sorted(scopes))} | (data or {})
    nav = "".join(
        f'<a href="{href}"{" class=active" if key == section else ""}>{label}</a>' for key, href, label in NAV
    )
    attributes = " ".join(f'data-{k}="{html.escape(v)}"' for k, v in data.items())
    # Only the page's module: the job page draws its first view without Plotly and loads Plotly's bundles
    # itself afterwards (static/js/job.js), so no 1.5-4.8 MB script competes with its first view.
    scripts = f'<script type="module" src="/ui/static/js/{script}"></script>'
    preload = "".join(f'<link rel="modulepreload" href="/ui/static/js/{m}">' for m in _module_imports(script))
    preload += "".join(f'<link rel="preload" href="{html.escape(u)}" as="fetch" crossorigin>' for u in prefetch)
    body = _template("shell.html").substitute(
        title=title, nav=nav, user=html.escape(user), page=page, data=attributes, scripts=scripts, preload=preload,
        content=(UI_ROOT / "pages" / f"{page}.html").read_text(encoding="utf-8"),
    )  # fmt: skip
    return _html(body)


async def _page(
    request: Request,
    settings: SettingsDep,
    page: str,
    data: dict[str, str] | None = None,
    prefetch: tuple[str, ...] = (),
) -> Response:
    """The page for a browser with a valid session of read scope; a redirect to the login otherwise."""
    try:
        principal = await principal_for(request, settings, request_credential(request, None))
        if Scope.READ not in principal.scopes:
            raise Forbidden("no read scope")
    except KernelfarmError:
        # Back to the page asked for, with its query (a shared link to a filtered list kept its filters).
        target = request.url.path + (f"?{request.url.query}" if request.url.query else "")
        response = RedirectResponse(f"/ui/login?next={quote(target, safe='/')}", status.HTTP_303_SEE_OTHER)
        if request.cookies.get(SESSION_COOKIE):
            clear_session_cookies(response)  # ended, expired or unknown session: drop it
        return response
    return render_page(page, principal.name, principal.scopes, data, prefetch)


@router.get("")
@router.get("/")
async def root() -> RedirectResponse:
    return RedirectResponse("/ui/jobs", status.HTTP_303_SEE_OTHER)


@router.get("/login")
async def login_page(next: str = "/ui/jobs") -> HTMLResponse:
    target = next if SAFE_NEXT.match(next) else "/ui/jobs"
    return _html(_template("login.html").substitute(next=html.escape(target)))


MAX_LOGIN_BODY = 4096


@router.post("/session", status_code=status.HTTP_204_NO_CONTENT)
async def login(request: Request, settings: SettingsDep) -> Response:
    """Exchange an API token for the session cookies. JSON only: a cross-site form cannot send JSON
    without a CORS preflight, so no other site can log a browser in with its own token. The body is
    read here, after that check: declared as a body parameter, it was validated first, and a form
    post got "Field required" instead of the reason."""
    if not request.headers.get("content-type", "").startswith("application/json"):
        raise InvalidInput('send the token as JSON: {"token": "kf_..."}')
    raw = await request.body()
    try:
        data = loads_strict(raw) if len(raw) <= MAX_LOGIN_BODY else None
    except ValueError as exc:  # json.JSONDecodeError, with the reason
        raise InvalidInput(f"the body is not valid JSON: {exc}") from None
    token = data.get("token") if isinstance(data, dict) and set(data) == {"token"} else None
    if not isinstance(token, str) or not 1 <= len(token.strip()) <= 512:
        raise InvalidInput('send the token as JSON: {"token": "kf_..."} (1 to 512 characters, nothing else)')
    deadline = settings.api_database_deadline_seconds
    secret = await in_thread(deadline, _start_session, settings.database_url, token.strip())
    response = Response(status_code=status.HTTP_204_NO_CONTENT)
    set_session_cookies(response, secret, secure=settings.session_cookie_secure)
    return response


def _start_session(database_url: str | None, token: str) -> str:
    """A session of ``token``, a live token of read scope (Unauthorized or Forbidden otherwise)."""
    with session_scope(database_url) as session:
        row = authenticate(session, token)
        if Scope.READ not in effective_scopes(row.scopes):
            raise Forbidden(f"token {row.name!r} lacks scope 'read'")
        return ui_sessions.start_session(session, row, SESSION_MAX_AGE_S)


def _end_session(database_url: str | None, secret: str) -> None:
    with session_scope(database_url) as session:
        ui_sessions.end_session(session, secret)


@router.post("/logout", status_code=status.HTTP_204_NO_CONTENT)
async def logout(request: Request, settings: SettingsDep) -> Response:
    """End the browser's session, in every API process, and drop its cookies. Only with the CSRF
    header: without one (another site's form, which also comes without the cookie, SameSite=Strict)
    nothing changes, so no other site can log a user out."""
    secret = request.cookies.get(SESSION_COOKIE)
    if not secret:
        return Response(status_code=status.HTTP_204_NO_CONTENT)  # no session here: nothing to end
    if not csrf_ok(secret, request.headers.get(CSRF_HEADER)):
        raise Forbidden("missing or wrong X-CSRF-Token header: a logout comes from the dashboard's own pages")
    await in_thread(settings.api_database_deadline_seconds, _end_session, settings.database_url, secret)
    token_cache: TokenCache = request.app.state.token_cache
    token_cache.forget_all()
    response = Response(status_code=status.HTTP_204_NO_CONTENT)
    clear_session_cookies(response)
    return response


# A job's and a profile's id as the API writes it. Only these go into a page (a data attribute, preload
# URLs): a 34-digit "id" passed a looser check and its page then asked the API for it every 2 s, forever.
_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


def _not_an_id(value: str, what: str, back: tuple[str, str]) -> HTMLResponse | None:
    """None for an id as the API writes it; else a page that says so (a browser got the API's JSON)."""
    if _UUID.fullmatch(value):
        return None
    message = f"{value!r} is not a {what} id (ids look like 3f2c0e1a-9b7d-4c1e-8a55-0d6f2b9e4c71)."
    body = _template("not_found.html").substitute(message=html.escape(message), back=back[0], back_label=back[1])
    return HTMLResponse(body, status_code=status.HTTP_404_NOT_FOUND, headers=PAGE_HEADERS)


@router.get("/jobs")
async def jobs_page(request: Request, settings: SettingsDep) -> Response:
    return await _page(request, settings, "jobs")


@router.get("/jobs/{job_id}")
async def job_page(request: Request, settings: SettingsDep, job_id: str) -> Response:
    if (refused := _not_an_id(job_id, "job", ("/ui/jobs", "All jobs"))) is not None:
        return refused
    # The three answers of the job page's first view (static/js/job.js, firstView: the same URLs).
    first_view = (f"/v1/jobs/{job_id}", f"/v1/jobs/{job_id}/trial-columns?limit=50", f"/v1/jobs/{job_id}/convergence")
    return await _page(request, settings, "job", {"job-id": job_id}, first_view)


@router.get("/new")
async def new_job_page(request: Request, settings: SettingsDep) -> Response:
    return await _page(request, settings, "new")


@router.get("/kernels")
async def kernels_page(request: Request, settings: SettingsDep) -> Response:
    return await _page(request, settings, "kernels")


@router.get("/fleet")
async def fleet_page(request: Request, settings: SettingsDep) -> Response:
    return await _page(request, settings, "fleet")


@router.get("/profiles")
async def profiles_page(request: Request, settings: SettingsDep) -> Response:
    return await _page(request, settings, "profiles")


@router.get("/profiles/{profile_id}")
async def profile_page(request: Request, settings: SettingsDep, profile_id: str) -> Response:
    if (refused := _not_an_id(profile_id, "profile", ("/ui/profiles", "All model profiles"))) is not None:
        return refused
    return await _page(request, settings, "profile", {"profile-id": profile_id})


@router.get("/vendor/plotly.min.js")
async def plotly_js() -> FileResponse:
    """Plotly's JavaScript bundle from the installed plotly package (no CDN)."""
    return FileResponse(_plotly_path(), media_type="text/javascript",
                        headers={"Cache-Control": "public, max-age=86400"})  # fmt: skip


@router.get("/vendor/plotly-cartesian.min.js")
async def plotly_cartesian_js() -> FileResponse:
    """Plotly's cartesian partial bundle, the same plotly.js version as the wheel's (vendor/README.md)."""
    return FileResponse(_plotly_cartesian_path(), media_type="text/javascript",
                        headers={"Cache-Control": "public, max-age=86400"})  # fmt: skip


def install_ui(app: FastAPI) -> None:
    app.mount("/ui/static", StaticFiles(directory=str(UI_ROOT / "static")), name="ui-static")
    app.include_router(router)
