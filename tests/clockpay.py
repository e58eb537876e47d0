"""A call process that pays an invoice through a real call (run_tool), for the clock-step
trials in tests/test_money_faults.py. Run under libfaketime by the test:

    python tests/clockpay.py URL CALLER [READY GO]

Pays $100 on the caller's first invoice; with READY and GO, writes READY, waits for GO (the test
steps this process's clock meanwhile) and pays again with the same details: a retry of the same
call. Prints one JSON line: the answers, and this process's idea of the time before the retry.
The gateway is crashkit's FileGateway (FRONTDESK_TEST_GATEWAY_LOG), shared across processes.
"""

from __future__ import annotations

import asyncio
import json
import sys
from datetime import datetime, timezone
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import crashkit  # noqa: E402

from frontdesk.agents.patterns import run_tool  # noqa: E402
from frontdesk.agents.runtime import CallRuntime  # noqa: E402
from frontdesk.core.schema import open_store  # noqa: E402
from frontdesk.core.settings import load_settings  # noqa: E402

PAY = {"invoice_id": "INV-1001", "amount": "100", "confirmed": True}


async def attempt(spec: object, runtime: CallRuntime) -> str:
    try:
        return str(await run_tool(spec, runtime, "billing", dict(PAY), None))  # type: ignore[arg-type]
    except Exception as exc:  # the caller's sentence, for the test to read
        return f"error: {exc}"


async def main(url: str, caller: str, ready: str | None, go: str | None) -> None:
    settings = load_settings(database_url=url)
    registry = crashkit.load_registry(settings)
    store = await open_store(url, registry)
    try:
        runtime = CallRuntime(
            None, store=store, registry=registry, settings=settings, caller=caller
        )  # type: ignore[arg-type]
        spec = registry.tools["pay_invoice"]
        answers = [await attempt(spec, runtime)]
        now = datetime.now(timezone.utc)
        if ready and go:
            Path(ready).write_text("paid")
            while not Path(go).exists():
                await asyncio.sleep(0.02)
            now = datetime.now(timezone.utc)
            answers.append(await attempt(spec, runtime))
        print(json.dumps({"answers": answers, "now": now.timestamp()}))
    finally:
        await store.close()


if __name__ == "__main__":
    args = sys.argv[1:]
    asyncio.run(main(args[0], args[1], *(args[2:4] if len(args) >= 4 else (None, None))))
