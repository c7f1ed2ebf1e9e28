"""Swagger UI and ReDoc from assets shipped in a Python package (fastapi-offline's copies), so the API
docs work on hosts with no internet access. FastAPI's own /docs and /redoc load them from a CDN."""

from __future__ import annotations

from functools import cache
from importlib.resources import files

from fastapi import APIRouter, FastAPI, Request
from fastapi.openapi.docs import get_redoc_html, get_swagger_ui_html
from fastapi.responses import HTMLResponse, Response
from fastapi.staticfiles import StaticFiles

ASSETS_URL = "/docs-assets"
ASSETS = files("fastapi_offline") / "static"
# ReDoc's sidebar shows a Redocly logo from its CDN: served with that one URL pointing at a local image.
REDOC_JS_URL = "/docs-local/redoc.standalone.js"
REDOC_CDN_LOGO = b"https://cdn.redoc.ly/redoc/logo-mini.svg"

router = APIRouter(include_in_schema=False)


def _openapi_url(request: Request) -> str:
    return str(request.scope.get("root_path", "")) + (request.app.openapi_url or "/openapi.json")


@router.get("/docs")
async def swagger_ui(request: Request) -> HTMLResponse:
    return get_swagger_ui_html(
        openapi_url=_openapi_url(request),
        title=f"{request.app.title} — Swagger UI",
        swagger_js_url=f"{ASSETS_URL}/swagger-ui-bundle.js",
        swagger_css_url=f"{ASSETS_URL}/swagger-ui.css",
        swagger_favicon_url=f"{ASSETS_URL}/favicon.png",
    )


@router.get("/redoc")
async def redoc(request: Request) -> HTMLResponse:
    return get_redoc_html(
        openapi_url=_openapi_url(request),
        title=f"{request.app.title} — ReDoc",
        redoc_js_url=REDOC_JS_URL,
        redoc_favicon_url=f"{ASSETS_URL}/favicon.png",
        with_google_fonts=False,
    )


@cache
def _redoc_js() -> bytes:
    return (ASSETS / "redoc.standalone.js").read_bytes().replace(REDOC_CDN_LOGO, f"{ASSETS_URL}/favicon.png".encode())


@router.get(REDOC_JS_URL)
async def redoc_js() -> Response:
    return Response(_redoc_js(), media_type="text/javascript", headers={"Cache-Control": "public, max-age=86400"})


def install_docs(app: FastAPI) -> None:
    """Mount the assets and add the two pages (create the app with docs_url=None, redoc_url=None)."""
    app.mount(ASSETS_URL, StaticFiles(directory=str(ASSETS)), name="docs-assets")
    app.include_router(router)
