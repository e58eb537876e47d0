"""The console's OpenAPI document: FastAPI's, completed with what every route may answer and
how to authenticate, so the contract lists each status the code returns.

Added to each operation: 403 (not this machine, or a write from another origin), 503 with
Retry-After (the database not answering), 413 on writes (body over the limit), and with a token
401 (API) or a 303 to /login (pages). Pages answer bad input with a 400 page, not FastAPI's
422. The security schemes: the bearer token or the session cookie for the console (required
when it has a token), and the caller page's own access cookie.
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI

from frontdesk.agents.programs.web import auth, call

_MESSAGE = {
    "application/json": {
        "schema": {
            "type": "object",
            "properties": {"message": {"type": "string"}},
            "required": ["message"],
        }
    }
}
_HTML = {"text/html": {"schema": {"type": "string"}}}
_RETRY = {"Retry-After": {"schema": {"type": "integer"}, "description": "seconds"}}


def _common(page: bool, write: bool, token: bool) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {
        "403": {
            "description": "not from this machine (no token), or a state-changing request "
            "from another origin or with neither Origin nor Referer",
            "content": _MESSAGE,
        },
        "503": {
            "description": "the task database is not answering (or the stats are still being "
            "computed); try again after Retry-After",
            "headers": _RETRY,
            "content": _HTML if page else _MESSAGE,
        },
    }
    if write:
        out["413"] = {"description": "request body over 16 KiB", "content": _MESSAGE}
    if token and page:
        out["303"] = {"description": "no session: to /login?next=..."}
    elif token:
        out["401"] = {
            "description": "no valid token or session",
            "headers": {"WWW-Authenticate": {"schema": {"type": "string"}}},
            "content": _MESSAGE,
        }
    return out


def schema(app: FastAPI) -> dict[str, Any]:
    if app.openapi_schema is not None:
        return app.openapi_schema
    from fastapi.openapi.utils import get_openapi

    doc = get_openapi(title=app.title, version=app.version, summary=app.summary, routes=app.routes)
    doc.setdefault("components", {})["securitySchemes"] = {
        "bearer": {"type": "http", "scheme": "bearer", "description": "FRONTDESK_WEB_TOKEN"},
        "session": {"type": "apiKey", "in": "cookie", "name": auth.COOKIE,
                    "description": "set by POST /login"},
        "callAccess": {"type": "apiKey", "in": "cookie", "name": call.ACCESS_COOKIE,
                       "description": "the caller page's own access (FRONTDESK_WEB_CALL=token)"},
    }  # fmt: skip
    token = bool(app.state.token)
    for path, item in doc["paths"].items():
        for method, op in item.items():
            caller_page = path.startswith("/call")
            page = "pages" in op.get("tags", ())
            responses = op.setdefault("responses", {})
            if page and "422" in responses:
                del responses["422"]
                responses["400"] = {"description": "a parameter that cannot mean anything",
                                    "content": _HTML}  # fmt: skip
            for code, answer in _common(page, method == "post", token and not caller_page).items():
                responses.setdefault(code, answer)
            if caller_page:
                mode = app.state.call_access.mode
                op["security"] = [{"callAccess": []}] if mode == "token" else [{}]
            elif token:
                op["security"] = [{"bearer": []}, {"session": []}]
            else:
                op["security"] = [{}]  # loopback only, no credentials
    app.openapi_schema = doc
    return doc
