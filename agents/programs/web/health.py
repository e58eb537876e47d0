"""``GET /api/health``: whether this console's store can be trusted to keep writing.

200 ``{"status": "ok", "checks": [...]}`` or 503 ``{"message", "reasons"}`` with Retry-After,
for a monitor or a load balancer. Red when (db/health.py):
- the database's files were deleted or replaced under the running process (db/fileguard.py:
  from then on this process refuses to write);
- the filesystem holding an SQLite database has less free space than ``FRONTDESK_MIN_FREE_MB``;
- the database does not answer a small read within ``PROBE_SECONDS``.
Behind the same guard as the rest of the API (it names files, which is not for strangers).
"""

from __future__ import annotations

import asyncio
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel

from frontdesk.agents.programs.web.errors import RETRY_AFTER, one_line
from frontdesk.agents.programs.web.storecheck import min_free, store_problems
from frontdesk.db import health as db_health

PROBE_SECONDS = 5.0

router = APIRouter(prefix="/api", tags=["api"])


class Healthy(BaseModel):
    status: str
    checks: list[str]


class Unhealthy(BaseModel):
    message: str
    reasons: list[str]


_RED = {
    "model": Unhealthy,
    "description": "not healthy: the database's files were deleted or replaced, its disk is "
    "nearly full, or it does not answer; ``reasons`` says which",
    "headers": {"Retry-After": {"schema": {"type": "integer"}, "description": "seconds"}},
}


@router.get("/health", response_model=Healthy, responses={503: _RED})
async def get_health(request: Request) -> Any:
    """200 while the store is fit to write; 503 with every reason it is not."""
    store = request.app.state.store
    reasons = store_problems(request)
    try:
        await asyncio.wait_for(store.last_event_id(), PROBE_SECONDS)
    except Exception as exc:  # whatever it is, the answer is "not healthy", not a 500
        reasons.append(f"the task database is not answering: {one_line(exc)}")
    if reasons:
        body = {"message": "; ".join(reasons), "reasons": reasons}
        headers = {"Retry-After": str(RETRY_AFTER)}
        return JSONResponse(body, status_code=503, headers=headers)
    checks = ["the database answers"]
    path = db_health.sqlite_path(store.url)
    if path is not None:
        checks.append(f"{path}: files as opened")
        checks.append(db_health.headroom(path, min_free(request)).line())
    return {"status": "ok", "checks": checks}
