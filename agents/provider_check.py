"""``frontdesk doctor --check``: one cheap authenticated request per configured provider.

A model list where the provider has one (OpenAI and every compatible server, Gemini,
ElevenLabs), Deepgram's project list otherwise: each proves the URL answers and the key is
accepted, costs no tokens, and is made concurrently with a short timeout. Google Cloud Speech
and Text-to-Speech sign in with a service account (an OAuth exchange), so they are reported as
not checked rather than half-checked. A cause never carries a key: known secrets are scrubbed.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace

import httpx

from frontdesk.agents.providers import GOOGLE_CREDS, Choice, Choices, safe_url

CHECK_TIMEOUT_SECONDS = 4.0


@dataclass(frozen=True)
class Probe:
    kind: str  # LLM, STT or TTS
    entry: str  # the entry as doctor shows it, with its base URL
    method: str
    url: str | None  # None: not checkable here (``skip`` says why)
    headers: tuple[tuple[str, str], ...] = ()
    skip: str = ""


@dataclass(frozen=True)
class Outcome:
    probe: Probe
    status: str  # ok, error or info (not checked)
    detail: str


def _probe(entry: Choice, env: Mapping[str, str]) -> Probe:
    kind, name = entry.kind.upper(), entry.describe()
    key = env.get(entry.key_env, "") if entry.key_env else ""
    spec = entry.spec
    if spec is not None and spec.base_url is not None and entry.base_url:
        headers = (("Authorization", f"Bearer {key}"),) if key else ()
        return Probe(kind, name, "GET", entry.base_url.rstrip("/") + "/models", headers)
    if entry.provider == "google" and entry.kind == "llm" and env.get("GOOGLE_API_KEY"):
        url = "https://generativelanguage.googleapis.com/v1beta/models?pageSize=1"
        return Probe(kind, name, "GET", url, (("x-goog-api-key", key or env["GOOGLE_API_KEY"]),))
    if entry.provider == "deepgram":
        return Probe(
            kind,
            name,
            "GET",
            "https://api.deepgram.com/v1/projects",
            (("Authorization", f"Token {key}"),),
        )
    if entry.provider == "elevenlabs":
        return Probe(
            kind, name, "GET", "https://api.elevenlabs.io/v1/models", (("xi-api-key", key),)
        )
    why = f"not checked: signs in with a service account ({GOOGLE_CREDS}) on first use"
    if entry.kind == "llm":
        why = "not checked: Vertex AI signs in with Application Default Credentials on first use"
    return Probe(kind, name, "GET", None, skip=why)


def probes(choices: Choices) -> list[Probe]:
    """One probe per distinct enabled entry of every chain."""
    found: dict[tuple[str | None, tuple[tuple[str, str], ...], str], Probe] = {}
    for chain in choices:
        for entry in chain:
            if not entry.enabled:
                continue
            p = _probe(entry, choices.env)
            # OpenAI's LLM, STT and TTS share one URL and key: one request answers for all.
            key = (p.url, p.headers, "") if p.url else (None, (), p.kind + p.entry)
            if key in found:
                seen = found[key]
                if p.kind not in seen.kind.split("/"):
                    found[key] = replace(seen, kind=f"{seen.kind}/{p.kind}")
            else:
                found[key] = p
    return list(found.values())


def _scrub(text: str, secrets: Iterable[str]) -> str:
    for secret in secrets:
        if secret and len(secret) >= 4:
            text = text.replace(secret, "***")
    return text


def _server_message(response: httpx.Response) -> str:
    try:
        body = response.json()
    except ValueError:
        return response.text.strip().splitlines()[0][:160] if response.text.strip() else ""
    if isinstance(body, dict):
        err = body.get("error", body.get("detail", body.get("message", "")))
        if isinstance(err, dict):
            err = err.get("message", "") or err.get("status", "")
        return str(err)[:160]
    return ""


async def _run(client: httpx.AsyncClient, probe: Probe, timeout: float) -> Outcome:
    if probe.url is None:
        return Outcome(probe, "info", probe.skip)
    try:
        response = await client.request(
            probe.method, probe.url, headers=dict(probe.headers), timeout=timeout
        )
    except httpx.TimeoutException:
        return Outcome(probe, "error", f"no answer from {safe_url(probe.url)} within {timeout:g} s")
    except httpx.HTTPError as exc:
        return Outcome(
            probe,
            "error",
            f"cannot reach {safe_url(probe.url)}: {type(exc).__name__}: {exc}".rstrip(": "),
        )
    if response.status_code < 300:
        return Outcome(probe, "ok", f"ok (HTTP {response.status_code} from {safe_url(probe.url)})")
    what = {
        401: "key refused",
        403: "key not allowed",
        404: "no such endpoint (is the base URL right?)",
    }
    reason = what.get(response.status_code, "server error")
    message = _server_message(response)
    detail = f"HTTP {response.status_code}, {reason}" + (f": {message}" if message else "")
    return Outcome(probe, "error", detail)


async def check(choices: Choices, *, timeout: float = CHECK_TIMEOUT_SECONDS) -> list[Outcome]:
    """Every probe at once; the outcomes in probe order, secrets scrubbed."""
    todo = probes(choices)
    secrets = list(choices.env.values())
    async with httpx.AsyncClient(follow_redirects=False) as client:
        outcomes = await asyncio.gather(*(_run(client, p, timeout) for p in todo))
    return [Outcome(o.probe, o.status, _scrub(o.detail, secrets)) for o in outcomes]


__all__ = ["CHECK_TIMEOUT_SECONDS", "Outcome", "Probe", "check", "probes"]
