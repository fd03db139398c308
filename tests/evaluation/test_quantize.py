"""A second quantization made offline (backends/quantize.py, ``lsp-assist quantize``) and
the bench's flags that use it; tiny GGUFs from the tests' writer, llama.cpp's real quantizer.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from gguf import GGUFReader

from lsp_assist.backends.quantize import ensure_quantized, quantize, second_model
from lsp_assist.cli.main import main
from lsp_assist.errors import BackendError
from tests.support.tiny_gguf import write_tiny_gguf

Q4_0, Q8_0 = 2, 7  # llama_ftype values in general.file_type


def _file_type(path: Path) -> int:
    return int(GGUFReader(path).fields["general.file_type"].parts[-1][0])


@pytest.fixture
def tiny(tmp_path: Path) -> Path:
    return write_tiny_gguf(tmp_path / "tiny.gguf")


def test_quantize_writes_the_asked_type_and_leaves_the_source(tiny: Path, tmp_path: Path) -> None:
    before = tiny.read_bytes()
    out = quantize(tiny, tmp_path / "out" / "tiny-q4.gguf", "q4_0")
    assert _file_type(tiny) == 0 and _file_type(out) == Q4_0
    assert any(t.tensor_type.name == "Q4_0" for t in GGUFReader(out).tensors)
    assert tiny.read_bytes() == before
    # requantizing an already quantized file (the packaged models are) is allowed
    again = quantize(out, tmp_path / "tiny-q8.gguf", "Q8_0")
    assert _file_type(again) == Q8_0


def test_quantize_refuses_what_it_cannot_do(tiny: Path, tmp_path: Path) -> None:
    with pytest.raises(BackendError, match="unknown quantization"):
        quantize(tiny, tmp_path / "x.gguf", "Q3_FANCY")
    with pytest.raises(BackendError, match="no such model"):
        quantize(tmp_path / "missing.gguf", tmp_path / "x.gguf", "Q8_0")
    broken = tmp_path / "broken.gguf"
    broken.write_bytes(b"GGUF" + b"\0" * 60)
    with pytest.raises(BackendError, match="could not quantize"):
        quantize(broken, tmp_path / "x.gguf", "Q8_0")
    # nothing half-written is left behind
    assert sorted(p.name for p in tmp_path.iterdir()) == ["broken.gguf", "tiny.gguf"]


def test_a_quantization_is_made_once_and_then_reused(tiny: Path, tmp_path: Path) -> None:
    folder = tmp_path / "models"
    first = ensure_quantized(tiny, "Q8_0", folder)
    assert first == folder / "tiny.q8_0.gguf"
    stamp = first.stat().st_mtime_ns
    assert ensure_quantized(tiny, "q8_0", folder) == first
    assert first.stat().st_mtime_ns == stamp
    # a newer source is quantized again
    os.utime(tiny, ns=(stamp + 10**9, stamp + 10**9))
    ensure_quantized(tiny, "Q8_0", folder)
    assert first.stat().st_mtime_ns != stamp


def test_model2_is_a_file_or_a_type(tiny: Path, tmp_path: Path) -> None:
    other = write_tiny_gguf(tmp_path / "other.gguf", seed=3)
    assert second_model(tiny, str(other), tmp_path / "m") == other.resolve()
    assert second_model(tiny, "Q8_0", tmp_path / "m") == tmp_path / "m" / "tiny.q8_0.gguf"
    with pytest.raises(BackendError, match="no such file"):
        second_model(tiny, "elsewhere.gguf", tmp_path / "m")


def test_the_quantize_command_prints_the_file(
    tiny: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "q.gguf"
    assert main(["quantize", "Q8_0", "--model", str(tiny), "--out", str(out)]) == 0
    assert capsys.readouterr().out.strip() == str(out)
    assert _file_type(out) == Q8_0
    assert main(["quantize", "Q9_9", "--model", str(tiny)]) == 2


@pytest.mark.parametrize(
    ("rows", "why"),
    [("baseline,model2", "row model2 needs --model2"), ("baseline,basline", "unknown rows")],
)
def test_bench_refuses_rows_it_cannot_run(
    rows: str, why: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["bench", str(tmp_path), "--rows", rows, "--out", str(tmp_path / "o")]) == 2
    assert why in capsys.readouterr().err
    assert not (tmp_path / "o").exists()


def test_bench_help_states_the_default_task_count(capsys: pytest.CaptureFixture[str]) -> None:
    from lsp_assist.cli.bench_cmd import DEFAULT_TASKS, DEFAULT_TYPING
    from lsp_assist.evaluation.runner import split_tasks

    with pytest.raises(SystemExit):
        main(["bench", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    cross, in_file = split_tasks(DEFAULT_TASKS)
    assert f"{DEFAULT_TASKS} hole tasks ({cross} cross-file, {in_file} in-file)" in text
    assert f"{DEFAULT_TYPING} retyped line per row" in text
    assert f"(default {DEFAULT_TASKS})" in text
