"""The CLI as a user runs it: subprocesses of the installed ``lsp-assist`` entry point."""

from __future__ import annotations

import json
import socket
import subprocess
import time
from pathlib import Path

import pytest

from lsp_assist.backends.models import small_model_path
from tests.e2e.conftest import CLI, run_cli
from tests.support.ports import free_port
from tests.support.workspace import copy_demo


def test_help_documents_every_subcommand() -> None:
    out = run_cli("--help")
    assert out.returncode == 0
    for name in (
        "serve",
        "complete",
        "context",
        "index",
        "doctor",
        "stats",
        "demo",
        "bench",
        "eval",
        "quantize",
    ):
        assert name in out.stdout
        sub = run_cli(name, "--help")
        assert sub.returncode == 0 and "usage:" in sub.stdout


@pytest.mark.slow
def test_complete_json_reports_text_timings_and_layers(tmp_path: Path) -> None:
    workspace = copy_demo(tmp_path)
    target = workspace / "shop" / "checkout.py"
    target.write_text(target.read_text().rstrip() + "\n    return create_")
    line = len(target.read_text().split("\n"))
    out = run_cli(
        "complete",
        f"{target}:{line}:{len('    return create_') + 1}",
        "--json",
        "--workspace",
        str(workspace),
        "--model",
        str(small_model_path()),
        "--setting",
        f"cacheDir={tmp_path / 'cache'}",
        "--setting",
        "promptTimeoutMs=120000",
        "--setting",
        "generationTimeoutMs=120000",
    )
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    assert report["text"].strip()
    assert report["ttft_ms"] > 0 and report["latency_ms"] >= report["ttft_ms"]
    assert report["prompt_tokens"] == sum(report["layers"].values())
    assert set(report["layers"]) >= {"instructions", "editing_zone"}


def test_complete_missing_file_is_a_clear_error(tmp_path: Path) -> None:
    out = run_cli("complete", f"{tmp_path / 'nope.py'}:1:1")
    assert out.returncode == 2
    assert "no such file" in out.stderr


def test_complete_rejects_a_bad_location() -> None:
    out = run_cli("complete", "file.py:0:1")
    assert out.returncode == 2
    assert "1-based" in out.stderr


def test_doctor_reports_amx_and_model(tmp_path: Path) -> None:
    out = run_cli(
        "doctor", "--json", "--model", str(small_model_path()), "--workspace", str(tmp_path)
    )
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    llama = report["llama_cpp"]
    assert llama["installed"] is True
    assert llama["amx_active"] is False  # the set-up builds without AMX
    assert report["model"]["architecture"] == "llama"
    assert report["model"]["vocab_size"] == 49152
    assert "<file_sep>" in report["model"]["special_tokens"]
    # read from the file's header: a vocabulary-only load says F32 and 0
    assert report["model"]["quantization"] == "Q4_1"
    assert report["model"]["context_length_train"] == 8192
    assert "python" in report["grammars"]
    text = run_cli("doctor", "--model", str(small_model_path()), "--workspace", str(tmp_path))
    assert "AMX" in text.stdout and "in use: no" in text.stdout


def test_doctor_names_a_missing_model(tmp_path: Path) -> None:
    out = run_cli("doctor", "--json", "--model", str(tmp_path / "missing.gguf"))
    assert out.returncode == 1
    assert "missing.gguf" in json.loads(out.stdout)["model"]["error"]


def _serve_tcp(address: str, port: int, model: Path) -> str:
    """Start ``serve --tcp``, wait until 127.0.0.1:port accepts, stop it; return stderr."""
    proc = subprocess.Popen(
        [*CLI, "serve", "--tcp", address, "--model", str(model)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=1):
                    break
            except OSError:
                time.sleep(0.2)
        else:
            pytest.fail(f"server did not listen on {address}")
    finally:
        proc.terminate()
        _, err = proc.communicate(timeout=10)
    return err


def test_serve_tcp_binds_loopback_by_default(tmp_path: Path) -> None:
    port = free_port()
    err = _serve_tcp(str(port), port, tmp_path / "none.gguf")
    assert "127.0.0.1" in err and "non-loopback" not in err


def test_serve_warns_for_a_non_loopback_address(tmp_path: Path) -> None:
    port = free_port()
    err = _serve_tcp(f"0.0.0.0:{port}", port, tmp_path / "none.gguf")
    assert "non-loopback" in err


@pytest.mark.slow
def test_demo_reports_the_whole_of_an_early_answered_suggestion(tmp_path: Path) -> None:
    """`lsp-assist demo --json` (the main job) with the small model: each model answer's
    figures are the recorded ones, not the pending placeholder of an early answer."""
    workspace = copy_demo(tmp_path)
    out = run_cli(
        "demo",
        "--json",
        "--workspace",
        str(workspace),
        "--model",
        str(small_model_path()),
        # what is checked is the report, not the speed: a busy machine (CI beside other
        # work) evaluated the 477-token prompt past the 5 s default cap
        "--setting",
        "promptTimeoutMs=120000",
        "--setting",
        "generationTimeoutMs=120000",
        timeout=600,
    )
    assert out.returncode == 0, (out.stderr[-2000:], out.stdout[-3000:])
    report = json.loads(out.stdout)
    first = report["first"]
    assert first["suggestion"], report
    assert not first.get("pending") and first["prompt_tokens"] > 0, first
    if first.get("early"):  # answered early: the demo waited for the rest and showed it
        assert first["suggestion"].startswith(first["early"]), first
        assert first["whole_ms"] > 0, first
    assert report["after_typing"]["cache_hit"], report["after_typing"]
