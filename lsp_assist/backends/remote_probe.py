"""What ``lsp-assist doctor`` says about a configured remote server.

:func:`remote_report` asks the server at ``remoteUrl``, each step bounded by the
connect and prompt caps and reported rather than raised: is it reachable (``GET
/v1/models``, which llama-server, vLLM, SGLang and llama-cpp-python's server all
answer) and which model it serves; does it offer ``/infill`` (a one-token infill:
200 yes, 404/405 no such endpoint, 501 llama-server whose model has no FIM tokens);
are the model's FIM tokens known (from ``modelPath``'s vocabulary when set, else from
that answer); and how long one token takes through the remote backend itself, with
what ``remoteApi`` then speaks.
"""

from __future__ import annotations

import os
import time
from typing import Any

import httpx

from lsp_assist.backends.base import GenerationRequest, InfillParts, time_caps
from lsp_assist.backends.remote import RemoteBackend
from lsp_assist.backends.remote_api import ABSENT, INFILL_PATH
from lsp_assist.config import ModelSettings
from lsp_assist.errors import LspAssistError

PROBE_PREFIX = "def add(a, b):\n"
PROBE_TYPED = "    return"


def _client(settings: ModelSettings) -> httpx.Client:
    """A plain client with the API key (when set) and the settings' caps."""
    headers = {"Accept": "application/json"}
    key = os.environ.get(settings.remote_api_key_env, "") if settings.remote_api_key_env else ""
    if key:
        headers["Authorization"] = f"Bearer {key}"
    timeout = httpx.Timeout(
        time_caps(settings).prompt_s, connect=settings.remote_connect_timeout_ms / 1000
    )
    return httpx.Client(base_url=settings.remote_url.rstrip("/"), headers=headers, timeout=timeout)


def _models(client: httpx.Client) -> dict[str, Any]:
    """Reachability, the round trip of ``GET /v1/models`` and the model it names."""
    started = time.perf_counter()
    try:
        resp = client.get("/v1/models")
    except httpx.HTTPError as exc:
        return {"reachable": False, "error": f"{type(exc).__name__}: {exc}"}
    out: dict[str, Any] = {
        "reachable": True,
        "status": resp.status_code,
        "ms": round((time.perf_counter() - started) * 1000, 1),
        "model": "",
    }
    try:
        data = resp.json().get("data") if resp.status_code == 200 else None
    except ValueError:
        data = None
    if isinstance(data, list) and data and isinstance(data[0], dict):
        out["model"] = str(data[0].get("id", ""))
    return out


def _infill(client: httpx.Client) -> dict[str, Any]:
    """Whether ``/infill`` answers a one-token request, and what its status says."""
    body = {
        "input_prefix": PROBE_PREFIX,
        "input_suffix": "\n",
        "prompt": PROBE_TYPED,
        "n_predict": 1,
        "temperature": 0.0,
        "top_k": 1,
    }
    try:
        resp = client.post(INFILL_PATH, json=body)
    except httpx.HTTPError as exc:
        return {"offered": False, "error": f"{type(exc).__name__}: {exc}"}
    status = resp.status_code
    out: dict[str, Any] = {"offered": status == 200, "status": status}
    if status == 501:
        out["fim_tokens"] = False  # llama-server: the model lacks prefix/suffix/middle
    elif status == 200:
        out["fim_tokens"] = True
    elif status not in ABSENT:
        out["error"] = f"HTTP {status}: {resp.text[:200]}"
    return out


def _round_trip(settings: ModelSettings, report: dict[str, Any]) -> None:
    """One token through the remote backend (the path completions take); fills ``report``."""
    backend: RemoteBackend | None = None
    try:
        backend = RemoteBackend(settings)
        info = backend.info
        if backend.token_mode == "local" and "fim_tokens" not in report:
            report["fim_tokens"] = info.has_fim
            report["fim_from"] = "modelPath's vocabulary"
        if info.name and not report.get("model"):
            report["model"] = info.name
        parts = InfillParts(prefix=PROBE_PREFIX, suffix="\n", typed=PROBE_TYPED)
        request = GenerationRequest(
            prompt_tokens=backend.tokenize(PROBE_PREFIX + PROBE_TYPED),
            max_tokens=1,
            infill=parts if backend.wants_infill_parts else None,
        )
        result = backend.generate(request)
        report["round_trip_ms"] = round(result.latency_ms, 1)
        report["first_text_ms"] = round(result.ttft_ms, 1)
        report["stop_reason"] = result.stop_reason
        report["api"] = backend.api.current
        report["token_mode"] = backend.token_mode
    except LspAssistError as exc:
        report["round_trip_error"] = str(exc)
    finally:
        if backend is not None:
            backend.close()


def remote_report(settings: ModelSettings) -> dict[str, Any]:
    """Return what the remote server at ``settings.remote_url`` offers (module doc)."""
    report: dict[str, Any] = {"url": settings.remote_url, "remote_api": settings.remote_api}
    with _client(settings) as client:
        report.update(_models(client))
        if not report["reachable"]:
            return report
        infill = _infill(client)
    report["infill"] = infill
    if "fim_tokens" in infill:
        report["fim_tokens"] = infill["fim_tokens"]
        report["fim_from"] = "the server's /infill"
    _round_trip(settings, report)
    return report
