"""The index scan waits while the model loads (issue 11): sharing the CPU and the GIL with
the scan made the first answer on ``Lib/`` come 23 s after initialize, and the load-time
calibration time a busy machine."""

from __future__ import annotations

import threading
import time
from pathlib import Path

from lsp_assist.backends.base import Backend
from lsp_assist.config import Settings, parse_settings
from lsp_assist.serving.engine import CompletionEngine
from lsp_assist.serving.session import Session
from tests.serving.fakes import SlowBackend

FILES = 300


def test_scan_makes_no_progress_while_the_model_loads(tmp_path: Path) -> None:
    for i in range(FILES):
        (tmp_path / f"m{i:03d}.py").write_text(f"def f{i}():\n    return {i}\n")
    settings, _ = parse_settings(
        {"metrics": False, "persist": False, "watch": False, "contextBudget": 512}
    )
    assert isinstance(settings, Settings)
    done: list[int] = [0]
    started = threading.Event()

    def progress(count: int, _total: int) -> None:
        done[0] = count
        if count:
            started.set()
        time.sleep(0.02)  # a scan slow enough to be watched (called every FILES // 100)

    seen: list[int] = []

    def factory(_settings: Settings) -> Backend:
        seen.append(done[0])
        time.sleep(0.6)  # loading
        seen.append(done[0])
        return SlowBackend(step_s=0, tokens=1)

    engine = CompletionEngine(Session(settings, workspace=tmp_path, backend_factory=factory))
    thread = engine.session.start_indexing(progress)
    assert thread is not None
    assert started.wait(10)
    assert engine.session.load_backend() is not None
    thread.join(timeout=60)
    assert done[0] == FILES  # the scan went on after the load
    assert 0 < seen[0] < FILES, seen
    # progress is reported every FILES // 100 files: one file in flight may end meanwhile
    assert seen[1] - seen[0] <= FILES // 100, f"{seen[1] - seen[0]} files indexed during the load"
    engine.session.close()
