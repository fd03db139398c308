"""Secret-bearing files are never indexed, looked up, or returned by text_of."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from lsp_assist.config import IndexSettings
from lsp_assist.index.workspace import WorkspaceIndex

SECRET = "sk_live_SUPERSECRET_4242"


def test_secret_files_never_leak(tmp_path: Path) -> None:
    (tmp_path / "app.py").write_text("import os\n\ndef handler():\n    return os.environ['KEY']\n")
    secrets = {
        ".env": f"API_KEY={SECRET}\n",
        ".env.local": f"API_KEY={SECRET}\n",
        ".env.py": f"API_KEY = '{SECRET}'\n",
        "server.pem": f"-----BEGIN PRIVATE KEY-----\n{SECRET}\n",
        "tls.key": SECRET,
        "id_rsa": SECRET,
        "credentials.json": f'{{"token": "{SECRET}"}}',
        "token.json": SECRET,
        ".ssh/config.py": f"KEY = '{SECRET}'\n",
        "private/keys.py": f"def {SECRET}():\n    return '{SECRET}'\n",
    }
    for rel, text in secrets.items():
        path = tmp_path / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    settings = IndexSettings(deny_globs=["private/**"])
    index = WorkspaceIndex([tmp_path], settings, cache_dir=tmp_path.parent / "cache-secret")
    stats = index.scan()
    assert [p.name for p in index.files()] == ["app.py"]
    assert stats.files == 1
    for path in index.files():
        entry = index.file(path)
        assert entry is not None
        assert SECRET not in repr(dataclasses.asdict(entry))
    assert index.lookup(SECRET) == []
    assert index.lookup_prefix("sk_") == []
    assert index.lookup("API_KEY") == []
    for rel in secrets:
        path = tmp_path / rel
        assert index.is_denied(path), rel
        assert index.text_of(path) is None, rel
        assert index.tree_of(path) is None, rel
        assert index.file(path) is None, rel
        index.open_buffer(path, path.read_text())  # an open secret buffer is ignored too
        assert index.file(path) is None, rel
        assert index.text_of(path) is None, rel
    assert index.lookup(SECRET) == []
    assert not index.is_denied(tmp_path / "app.py")
    assert index.text_of(tmp_path / "app.py") is not None
    index.stop()
    db = (tmp_path.parent / "cache-secret" / "index.sqlite3").read_bytes()
    assert SECRET.encode() not in db


def test_symlink_to_secret_is_denied(tmp_path: Path) -> None:
    (tmp_path / ".env").write_text(f"KEY={SECRET}\n")
    (tmp_path / "settings.py").symlink_to(tmp_path / ".env")
    index = WorkspaceIndex([tmp_path])
    index.scan()
    assert index.files() == []
    assert index.text_of(tmp_path / "settings.py") is None
    assert index.tree_of(tmp_path / "settings.py") is None
    index.open_buffer(tmp_path / "settings.py", f"KEY = '{SECRET}'\n")
    assert index.file(tmp_path / "settings.py") is None
    assert index.text_of(tmp_path / "settings.py") is None
    assert index.is_denied(tmp_path / "settings.py")
