"""`/docs` and `/redoc` with their assets served by the service itself: they work offline.

FastAPI's own pages load Swagger UI and ReDoc from public CDNs, so without
internet they stay blank. The bundles come from the `fastapi-offline`
package instead. ReDoc's bundle still shows its vendor's logo from a CDN in
the side menu; it is served with that one address pointing at a local
image, so opening the docs makes no request that leaves the host.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

import fastapi_offline
from fastapi import FastAPI, Request
from fastapi.openapi.docs import get_redoc_html, get_swagger_ui_html
from fastapi.responses import HTMLResponse, Response
from fastapi.staticfiles import StaticFiles

ASSETS_PATH = "/api-docs-assets"
_BUNDLES = Path(fastapi_offline.__file__).parent / "static"
_REDOC_LOGO = "https://cdn.redoc.ly/redoc/logo-mini.svg"


def mount_api_docs(app: FastAPI) -> None:
    """Serve `/docs` (Swagger UI) and `/redoc` from bundled assets; build `app` without its own."""
    title = app.title

    def root(request: Request) -> str:
        return str(request.scope.get("root_path", ""))

    def swagger(request: Request) -> HTMLResponse:
        return get_swagger_ui_html(
            openapi_url=f"{root(request)}{app.openapi_url}",
            title=f"{title} - Swagger UI",
            swagger_js_url=f"{root(request)}{ASSETS_PATH}/swagger-ui-bundle.js",
            swagger_css_url=f"{root(request)}{ASSETS_PATH}/swagger-ui.css",
            swagger_favicon_url=f"{root(request)}{ASSETS_PATH}/favicon.png",
            # No validator badge: it would send the document to an online validator.
            swagger_ui_parameters={"validatorUrl": None},
        )

    def redoc(request: Request) -> HTMLResponse:
        return get_redoc_html(
            openapi_url=f"{root(request)}{app.openapi_url}",
            title=f"{title} - ReDoc",
            redoc_js_url=f"{root(request)}{ASSETS_PATH}/redoc.js",
            redoc_favicon_url=f"{root(request)}{ASSETS_PATH}/favicon.png",
            with_google_fonts=False,
        )

    def redoc_bundle(request: Request) -> Response:
        logo = f"{root(request)}{ASSETS_PATH}/favicon.png"
        return Response(_redoc_source().replace(_REDOC_LOGO, logo), media_type="text/javascript")

    app.add_api_route("/docs", swagger, methods=["GET"], include_in_schema=False)
    app.add_api_route("/redoc", redoc, methods=["GET"], include_in_schema=False)
    app.add_api_route(f"{ASSETS_PATH}/redoc.js", redoc_bundle, include_in_schema=False)
    app.mount(ASSETS_PATH, StaticFiles(directory=_BUNDLES), name="api-docs-assets")


@cache
def _redoc_source() -> str:
    return (_BUNDLES / "redoc.standalone.js").read_text(encoding="utf-8")
