"""``lsp-assist doctor``: what this machine, build, model, prompt budget and workspace look like.

With ``backend: remote`` it also asks the server at ``remoteUrl`` (reachable, model,
FIM tokens, ``/infill``, one token's round trip: ``backends/remote_probe.py``).
"""

from __future__ import annotations

import argparse
import json
import platform
import re
import sys
from pathlib import Path
from typing import Any

from lsp_assist.backends import (
    PRESETS,
    Vocabulary,
    preset_assembled,
    preset_installed,
    resolve_model_path,
    resolve_model_settings,
)
from lsp_assist.backends.remote_probe import remote_report
from lsp_assist.cli.common import add_model_flags, settings_from_args
from lsp_assist.config import cache_root, workspace_cache_dir
from lsp_assist.index import available_languages
from lsp_assist.serving import measure


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the doctor subcommand."""
    parser = sub.add_parser(
        "doctor", help="report Python, llama.cpp build (AMX?), model, prompt budget, grammars"
    )
    parser.add_argument("--workspace", type=Path, default=Path.cwd(), help="workspace folder")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    add_model_flags(parser)
    parser.set_defaults(func=run)


def cpu_flags() -> set[str]:
    """Return the CPU flags from /proc/cpuinfo (empty elsewhere)."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("flags"):
                return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return set()


def llama_build() -> dict[str, Any]:
    """Return llama.cpp's compiled features and whether AMX is in use."""
    try:
        # local: a missing or broken llama-cpp-python is reported, not a failed start
        import llama_cpp
    except ImportError as exc:
        return {"installed": False, "error": str(exc)}
    info = llama_cpp.llama_print_system_info().decode(errors="replace")
    features = {k: v == "1" for k, v in re.findall(r"([A-Z0-9_]+) = (\d)", info)}
    cpu = cpu_flags()
    amx_built = any(k.startswith("AMX") and v for k, v in features.items())
    gpu = bool(llama_cpp.llama_supports_gpu_offload())
    return {
        "installed": True,
        "version": llama_cpp.__version__,
        "system_info": info.strip(),
        "avx2": features.get("AVX2", False),
        "avx512": features.get("AVX512", False),
        "amx_built": amx_built,
        "cpu_has_amx": bool({"amx_tile", "amx_int8"} & cpu),
        "amx_active": amx_built and bool({"amx_tile", "amx_int8"} & cpu),
        "gpu_offload": gpu,
        "cuda": "CUDA" in info,
        "metal": "METAL" in info.upper(),
    }


def model_report(path: Path) -> dict[str, Any]:
    """Return a model's metadata from a vocabulary-only load."""
    vocab = Vocabulary(path)
    try:
        info = vocab.info()
    finally:
        vocab.close()
    return {
        "path": str(path),
        "size_mb": round(path.stat().st_size / 1e6, 1),
        "name": info.name,
        "architecture": info.architecture,
        "quantization": info.quantization,
        "vocab_size": info.vocab_size,
        "context_length_train": info.context_length_train,
        "fim": {
            "prefix": info.fim_prefix_id,
            "suffix": info.fim_suffix_id,
            "middle": info.fim_middle_id,
        },
        "special_tokens": dict(info.special_tokens),
    }


def budget_report(settings: Any) -> dict[str, Any]:
    """Return the prompt budget a server would start with (loads and times the model)."""
    try:
        decision, backend = measure(settings)
    except Exception as exc:  # doctor reports every failure instead of stopping
        return {"error": str(exc)}
    if backend is not None:
        backend.close()
    return decision.to_json()


def presets_report(settings: Any) -> list[dict[str, Any]]:
    """Return each packaged preset: its model, whether installed, whether in force."""
    chosen = "" if settings.model.model_path.strip() else settings.model.model.strip()
    return [
        {
            "name": name,
            "title": preset.title,
            "installed": preset_installed(name),
            "assembled": preset_assembled(name),
            "in_force": name == chosen,
            "draft": preset.draft,
            "license": preset.license,
        }
        for name, preset in PRESETS.items()
    ]


def collect(args: argparse.Namespace) -> dict[str, Any]:
    """Gather the whole report."""
    settings, warnings = settings_from_args(args)
    report: dict[str, Any] = {
        "python": {"version": platform.python_version(), "executable": sys.executable},
        "platform": platform.platform(),
        "settings_warnings": warnings,
        "llama_cpp": llama_build(),
    }
    report["presets"] = presets_report(settings)
    try:
        path = resolve_model_path(settings.model)
        report["model"] = model_report(path)
        resolved = resolve_model_settings(settings.model)
        report["model"]["draft"] = resolved.draft
        report["model"]["draft_model"] = resolved.draft_model_path
    except Exception as exc:  # doctor reports every failure instead of stopping
        report["model"] = {"error": str(exc)}
    if settings.model.backend == "remote":
        report["remote"] = remote_report(settings.model)
    report["budget"] = budget_report(settings)
    try:
        report["grammars"] = available_languages()
    except Exception as exc:
        report["grammars"] = {"error": str(exc)}
    report["cache_root"] = str(cache_root(settings))
    report["workspace"] = str(args.workspace.resolve())
    report["workspace_cache_dir"] = str(workspace_cache_dir(settings, args.workspace))
    return report


def run(args: argparse.Namespace) -> int:
    """Print the report; exit 1 when something essential is broken."""
    report = collect(args)
    llama = report["llama_cpp"]
    ok = bool(llama.get("installed")) and "error" not in report["model"]
    if "remote" in report:
        ok = ok and bool(report["remote"].get("reachable"))
    if args.json:
        print(json.dumps(report, indent=2))
        return 0 if ok else 1
    print(f"Python        {report['python']['version']} ({report['python']['executable']})")
    if llama.get("installed"):
        print(f"llama.cpp     llama-cpp-python {llama['version']}")
        feats = [n for n in ("avx2", "avx512", "cuda", "metal") if llama.get(n)]
        yes = {True: "yes", False: "no"}
        features = ", ".join(f.upper() for f in feats) or "none"
        print(f"  features    {features}; GPU offload: {yes[llama['gpu_offload']]}")
        print(
            f"  AMX         in use: {'YES' if llama['amx_active'] else 'no'} "
            f"(built with AMX: {yes[llama['amx_built']]}; "
            f"CPU has AMX: {yes[llama['cpu_has_amx']]})"
        )
        if llama["amx_active"]:
            print(
                "  WARNING     this build uses AMX, which segfaults on the first decode "
                "(llama.cpp #20824); rebuild with `make clean setup`"
            )
    else:
        print(f"llama.cpp     NOT INSTALLED: {llama.get('error')}")
    for preset in report["presets"]:
        if not preset["installed"]:
            flags = ["NOT INSTALLED (make setup)"]
        elif preset["assembled"]:
            flags = ["installed"]
        else:
            flags = [f"installed, assembled on first use (--model {preset['name']}, ~10 s)"]
        if preset["in_force"]:
            flags.append("IN FORCE")
        if preset["draft"]:
            flags.append(f"drafts with {preset['draft']}")
        print(f"preset        {preset['name']:<11} {preset['title']}: {', '.join(flags)}")
    model = report["model"]
    if "error" in model:
        print(f"model         ERROR: {model['error']}")
    else:
        fim = model["fim"]
        fim_text = "yes" if None not in fim.values() else "no"
        print(f"model         {model['path']} ({model['size_mb']} MB)")
        print(
            f"  metadata    {model['architecture']}, {model['quantization']}, "
            f"vocab {model['vocab_size']}, trained context {model['context_length_train']}"
        )
        print(f"  FIM tokens  {fim_text} {fim if fim_text == 'yes' else ''}".rstrip())
        draft = model.get("draft_model") or "none"
        print(f"  drafting    {model.get('draft')} (draft model: {draft})")
        if model["special_tokens"]:
            print(f"  special     {', '.join(sorted(model['special_tokens']))}")
    if "remote" in report:
        print_remote(report["remote"])
    budget = report["budget"]
    print(f"budget        {budget.get('reason') or 'ERROR: ' + str(budget.get('error'))}")
    grammars = report["grammars"]
    print(f"grammars      {', '.join(grammars) if isinstance(grammars, list) else grammars}")
    print(f"cache         {report['cache_root']}")
    print(f"workspace     {report['workspace']} -> {report['workspace_cache_dir']}")
    for warning in report["settings_warnings"]:
        print(f"warning       {warning}")
    return 0 if ok else 1


def print_remote(remote: dict[str, Any]) -> None:
    """Print the remote server's lines of the report."""
    if not remote.get("reachable"):
        print(f"remote        {remote['url']} UNREACHABLE: {remote.get('error')}")
        return
    model = remote.get("model") or "unknown"
    print(
        f"remote        {remote['url']} reachable (GET /v1/models: HTTP {remote['status']}, "
        f"{remote['ms']} ms), model {model}"
    )
    fim = remote.get("fim_tokens")
    fim_text = "unknown" if fim is None else "yes" if fim else "NO"
    source = f" (from {remote['fim_from']})" if "fim_from" in remote else ""
    print(f"  FIM tokens  {fim_text}{source}")
    infill = remote.get("infill", {})
    if infill.get("offered"):
        offered = "offered"
    elif infill.get("status") == 501:
        offered = "not usable (HTTP 501: the server's model has no FIM tokens)"
    else:
        offered = f"not offered ({infill.get('error') or 'HTTP ' + str(infill.get('status'))})"
    print(f"  /infill     {offered}")
    if "round_trip_error" in remote:
        print(f"  round trip  ERROR: {remote['round_trip_error']}")
    else:
        print(
            f"  round trip  {remote['round_trip_ms']} ms for one token "
            f"(first text {remote['first_text_ms']} ms, {remote['stop_reason']}); "
            f"remoteApi {remote['remote_api']} -> {remote['api']}, tokens: {remote['token_mode']}"
        )
