"""``lsp-assist context`` with ``layerVector`` on: the vector matches in the explain output.

The CLI runs as a subprocess on a small workspace with the packaged embedding model: the
first run embeds the workspace's definitions (progress on stderr) into the workspace's
cache database, a second run reads them back, ``--no-embed`` counts what is missing.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.workspace import write_files

pytest.importorskip("llama_cpp")
pytest.importorskip("all_minilm_l6_v2")

CLI = [sys.executable, "-m", "lsp_assist.cli.main", "context"]
FILES = {
    "shop/mail.py": (
        "def send_receipt(address, order):\n"
        '    """Render the receipt of an order and mail it to the customer\'s address."""\n'
        "    body = render_receipt(order)\n"
        "    smtp_deliver(address, body)\n"
    ),
    "shop/geo.py": (
        "class Point:\n"
        '    """A point on the map."""\n\n'
        "    def distance(self, other):\n"
        "        return ((self.x - other.x) ** 2 + (self.y - other.y) ** 2) ** 0.5\n"
    ),
    "shop/checkout.py": (
        "def checkout(order):\n"
        '    """Charge the order, then mail the receipt to the customer."""\n'
        "    charge(order.card, order.total)\n"
        "    address = order.customer.email\n"
        "    \n"
    ),
}


def _context(workspace: Path, cache: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    location = f"{workspace / 'shop' / 'checkout.py'}:5:5"
    args = [location, "--workspace", str(workspace), "--budget", "600"]
    args += ["--setting", f"cacheDir={cache}", *extra]
    proc = subprocess.run([*CLI, *args], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return proc


def test_context_shows_vector_matches_with_scores(tmp_path: Path) -> None:
    workspace = write_files(tmp_path / "ws", FILES)
    cache = tmp_path / "cache"
    on = ("--setting", "layerVector=true")

    first = _context(workspace, cache, *on, "--json")
    # mail.py 1, geo.py 2 (the class and its method), checkout.py 1
    assert "vectors: embedding 3/3 files (4 chunks)" in first.stderr
    assert "vectors: 4 chunks of 3 files (0 from the cache, 4 embedded now)" in first.stderr
    data = json.loads(first.stdout)
    similar = next(layer for layer in data["layers"] if layer["name"] == "similar")
    mail = [item for item in similar["items"] if item["source"] == "shop/mail.py"]
    assert mail and mail[0]["reason"].startswith("vector cosine ")
    assert "(function send_receipt)" in mail[0]["reason"]
    cosine = float(mail[0]["reason"].split()[2])
    assert 0.5 <= cosine <= 1.0  # the default threshold let it through
    assert "smtp_deliver(address, body)" in data["prompt"]["prompt"]
    # the same file's own definition and unrelated code are not offered
    assert all(item["source"] != "shop/checkout.py" for item in similar["items"])

    second = _context(workspace, cache, *on)
    assert "(4 from the cache, 0 embedded now)" in second.stderr
    assert "embedding" not in second.stderr
    assert f"vector cosine {cosine:.2f} (function send_receipt)" in second.stdout
    assert "== similar:" in second.stdout and "shop/mail.py lines 1-4" in second.stdout

    (workspace / "shop" / "wind.py").write_text(
        "def wind_speed(city):\n    return gradient(city) * 3.6\n"
    )
    counted = _context(workspace, cache, *on, "--no-embed")
    assert "vectors: 1 chunk of 1 file without a vector (--no-embed)" in counted.stderr
    assert "vector cosine" in counted.stdout  # the cached vectors still serve

    off = _context(workspace, cache)
    assert "vectors:" not in off.stderr and "vector cosine" not in off.stdout
    assert "smtp_deliver" not in off.stdout  # neither imported nor open: only vectors find it
