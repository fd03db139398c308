"""No doc outside docs/history/ names a commit of this repository (issue 48, M4).

A guide that says "before commit abc1234" goes stale with the next change, and its reader
has to open git to learn what it means; a guide names a change by what it did (and, for
a before/after run, how to find that code again), and the dated runs with their commits
live in docs/history/. Every ``\\b[0-9a-f]{7,40}\\b`` token (an abbreviated or a whole
commit id) of README.md and of the docs/**/*.md outside docs/history/ is looked up in
this repository with one ``git cat-file --batch-check`` (``<token>^{commit}``): a token
that names a commit fails the test. Peers' pins (llama.cpp's, a model's revision) are
not objects of this repository, so they pass.

The lookup uses every object the clone holds (all its refs, not only HEAD's history). A
shallow clone holds fewer, so the test warns there; a missing ``git`` or a checkout that
is not a repository fails it with the reason (CI runs on a clone of the repository).
"""

from __future__ import annotations

import re
import shutil
import subprocess
import warnings
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

HASH = re.compile(r"\b[0-9a-f]{7,40}\b")
"""What could be a commit id, abbreviated or whole (decimal numbers too: git reads them
alike). The review's check reads 7 to 12 characters; whole ids are looked up as well."""

HISTORY = "history"
"""docs/history/: the dated runs, the only docs that may name this repository's commits."""


def docs_to_check(root: Path) -> list[Path]:
    """README.md and every Markdown file under docs/ outside docs/history/."""
    docs = root / "docs"
    found = [path for path in docs.rglob("*.md") if path.relative_to(docs).parts[0] != HISTORY]
    return [*sorted(found), root / "README.md"]


def git(root: Path, *args: str, stdin: str | None = None) -> str:
    """``git -C root ARGS`` (its output); the test fails with the reason when git is
    missing or ``root`` is not a repository."""
    exe = shutil.which("git")
    if exe is None:
        pytest.fail("git is not installed: this test looks the docs' hashes up in the repository")
    proc = subprocess.run(
        [exe, "-C", str(root), *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    if proc.returncode != 0:
        pytest.fail(
            f"`git {' '.join(args)}` in {root} failed (rc {proc.returncode}): "
            f"{proc.stderr.strip()}; this test needs a clone of the repository"
        )
    return proc.stdout


def commits_named(root: Path, docs: list[Path]) -> list[str]:
    """``path:line: token`` for each token of ``docs`` that names a commit of the
    repository at ``root``."""
    git(root, "rev-parse", "--git-dir")  # a repository, or the test fails saying so
    if git(root, "rev-parse", "--is-shallow-repository").strip() == "true":
        warnings.warn(
            "a shallow clone: only the commits it holds are looked up "
            "(git fetch --unshallow for the whole history)",
            stacklevel=2,
        )
    places: dict[str, list[str]] = {}
    for path in docs:
        for n, line in enumerate(path.read_text("utf-8").splitlines(), 1):
            for token in HASH.findall(line):
                place = f"{path.relative_to(root)}:{n}"
                if place not in places.setdefault(token, []):
                    places[token].append(place)
    if not places:
        return []
    tokens = list(places)
    answer = git(
        root, "cat-file", "--batch-check", stdin="".join(f"{t}^{{commit}}\n" for t in tokens)
    )
    lines = answer.splitlines()
    assert len(lines) == len(tokens), (tokens, answer)
    # a commit: "<id> commit <size>"; otherwise "<token>^{commit} missing" (or "ambiguous")
    named = [t for t, line in zip(tokens, lines, strict=True) if line.split()[1:2] == ["commit"]]
    return [f"{place}: {token}" for token in named for place in places[token]]


def test_no_doc_outside_history_names_a_commit_of_this_repository() -> None:
    docs = docs_to_check(ROOT)
    assert len(docs) > 10 and (ROOT / "docs" / "testing.md") in docs, docs
    found = commits_named(ROOT, docs)
    assert not found, (
        "these docs name commits of this repository: name the change by what it did "
        "(and how to find its code: a file it added, a date), or move the dated run to "
        "docs/history/\n" + "\n".join(found)
    )


def test_the_check_finds_a_commit_and_passes_a_peers_pin(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path.parent))
    git(tmp_path, "init", "-q")
    (tmp_path / "README.md").write_text("# a project\n")
    git(tmp_path, "add", "README.md")
    git(
        tmp_path,
        *("-c", "user.name=t", "-c", "user.email=t@example.com", "-c", "commit.gpgsign=false"),
        *("commit", "-q", "-m", "one"),
    )
    head = git(tmp_path, "rev-parse", "HEAD").strip()
    peer = ("0" if head[0] != "0" else "1") + "badc0de"  # never this repository's commit
    (tmp_path / "docs" / HISTORY).mkdir(parents=True)
    (tmp_path / "docs" / HISTORY / "runs.md").write_text(f"run at {head[:7]}\n")
    (tmp_path / "docs" / "guide.md").write_text(f"llama.cpp pinned at {peer}; 12345 tokens\n")
    docs = docs_to_check(tmp_path)
    assert docs == [tmp_path / "docs" / "guide.md", tmp_path / "README.md"]
    assert commits_named(tmp_path, docs) == []
    (tmp_path / "docs" / "guide.md").write_text(
        f"pinned at {peer}\nbefore {head[:9]} it was slow\nthe whole id: {head}\n"
    )
    assert commits_named(tmp_path, docs) == [
        f"docs/guide.md:2: {head[:9]}",
        f"docs/guide.md:3: {head}",
    ]


def test_the_check_fails_outside_a_repository(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path.parent))
    (tmp_path / "README.md").write_text("nothing\n")
    with pytest.raises(pytest.fail.Exception, match="needs a clone of the repository"):
        commits_named(tmp_path, [tmp_path / "README.md"])
