"""The walk: ignore files, skipped folders, binaries, size limit, symlinks."""

from __future__ import annotations

import os
from pathlib import Path

from lsp_assist.config import IndexSettings
from lsp_assist.index.workspace import WorkspaceIndex


def test_walk_rules(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "leak.py").write_text("def outside_fn():\n    pass\n")
    files = {
        "keep.py": "def kept():\n    pass\n",
        "src/lib.ts": "export function tsFn() {}\n",
        "ignored/x.py": "def ignored_dir():\n    pass\n",
        "gen/a.gen.py": "def generated():\n    pass\n",
        "gen/sub/.gitignore": "local.py\n",
        "gen/sub/local.py": "def nested_ignored():\n    pass\n",
        "gen/sub/other.py": "def nested_kept():\n    pass\n",
        "excluded.py": "def excluded_by_info():\n    pass\n",
        "skipme/y.py": "def user_excluded():\n    pass\n",
        "node_modules/dep/index.js": "function depFn() {}\n",
        ".venv/lib/mod.py": "def venv_fn():\n    pass\n",
        "env2/pyvenv.cfg": "home = /usr\n",
        "env2/lib/m.py": "def venv2_fn():\n    pass\n",
        "build/out.py": "def build_fn():\n    pass\n",
        "__pycache__/c.py": "def cache_fn():\n    pass\n",
        ".git/hooks/h.py": "def git_fn():\n    pass\n",
        "README.md": "# not code\n",
    }
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    (root / ".gitignore").write_text("ignored/\n*.gen.py\n")
    (root / ".git" / "info").mkdir(parents=True)
    (root / ".git" / "info" / "exclude").write_text("excluded.py\n")
    (root / "big.py").write_text("x = 1\n" * 400)
    (root / "bin.py").write_bytes(b"def binary():\n\x00\x01\x02")
    os.symlink(outside, root / "link_out")
    os.symlink(outside / "leak.py", root / "leak_link.py")
    os.symlink(root / "src", root / "src_again")
    settings = IndexSettings(max_file_bytes=1000, exclude_globs=["skipme/"])
    index = WorkspaceIndex([root], settings)
    index.scan()
    names = {index.relative(p) for p in index.files()}
    assert names == {"keep.py", "src/lib.ts", "gen/sub/other.py"}
    assert not index.lookup("outside_fn")
    assert index.text_of(outside / "leak.py") is None
    assert index.text_of(root / "leak_link.py") is None
    assert index.text_of(root / "link_out" / "leak.py") is None
    assert index.tree_of(root / "link_out" / "leak.py") is None
    assert index.text_of(root / "bin.py") is None
    assert index.text_of(root / "keep.py") == files["keep.py"]
    tree = index.tree_of(root / "keep.py")
    assert tree is not None and tree.root_node.type == "module"


def test_symlinked_root_and_lru(tmp_path: Path) -> None:
    real = tmp_path / "real"
    real.mkdir()
    for i in range(5):
        (real / f"m{i}.py").write_text(f"def f{i}():\n    return {i}\n" + "# pad\n" * 200)
    link = tmp_path / "link"
    os.symlink(real, link)
    settings = IndexSettings(file_cache_mb=1)
    index = WorkspaceIndex([link], settings)
    index.scan()
    assert index.roots == [real]
    assert index.file(link / "m1.py") is not None
    assert index.relative(link / "m1.py") == "m1.py"
    assert index.text_of(link / "m2.py") == (real / "m2.py").read_text()
    for i in range(5):
        assert index.tree_of(real / f"m{i}.py") is not None
    assert index._cache.bytes_used <= 1024 * 1024


def test_lru_never_serves_stale_text(tmp_path: Path) -> None:
    path = tmp_path / "m.py"
    path.write_text("def one():\n    pass\n")
    index = WorkspaceIndex([tmp_path], IndexSettings(watch=False))
    index.scan()
    assert index.text_of(path) == "def one():\n    pass\n"
    path.write_text("def two():\n    return 2\n")
    st = path.stat()
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000))
    assert index.text_of(path) == "def two():\n    return 2\n"
    tree = index.tree_of(path)
    assert tree is not None and b"two" in (tree.root_node.text or b"")
    path.unlink()
    assert index.text_of(path) is None
