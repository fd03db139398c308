"""Files: which workspace files the index may read, and the walk that finds them.

Owns the rules: .gitignore files (every level) and .git/info/exclude through
``pathspec``, the built-in skip list (VCS folders, virtual environments,
node_modules, build output, caches), the size limit, binary detection, symlinks
(followed only when they stay inside a workspace root, never twice), and the secret
deny list (``.env*``, keys, certificates, credential and token files, plus the user's
``deny_globs``), which :meth:`FileRules.is_denied` applies to every read.
"""

from __future__ import annotations

import contextlib
import fnmatch
import logging
import os
import re
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pathspec

from lsp_assist.config import IndexSettings
from lsp_assist.documents.document import language_for_path

logger = logging.getLogger(__name__)

SKIP_DIRS = frozenset(
    {
        ".git",
        ".hg",
        ".svn",
        ".bzr",
        "node_modules",
        "bower_components",
        "__pycache__",
        ".venv",
        "venv",
        ".tox",
        ".nox",
        ".eggs",
        ".mypy_cache",
        ".pytest_cache",
        ".ruff_cache",
        ".hypothesis",
        "site-packages",
        "dist-packages",
        "build",
        "dist",
        "target",
        "out",
        ".next",
        ".nuxt",
        ".gradle",
        ".terraform",
        ".cache",
        ".idea",
        "coverage",
        ".ssh",
        ".gnupg",
        ".aws",
    }
)
"""Folder names never descended into (VCS, environments, dependencies, build output)."""

SECRET_GLOBS = (
    ".env*",
    "*.env",
    "*.pem",
    "*.key",
    "*.p12",
    "*.pfx",
    "*.jks",
    "*.keystore",
    "*.kdbx",
    "*.ppk",
    "*.gpg",
    "*.asc",
    "id_rsa*",
    "id_dsa*",
    "id_ecdsa*",
    "id_ed25519*",
    ".netrc",
    "_netrc",
    ".npmrc",
    ".pypirc",
    ".pgpass",
    ".htpasswd",
    ".git-credentials",
    "credentials",
    "credentials.*",
    "*.credentials",
    "*credentials*.json",
    "client_secret*.json",
    "service-account*.json",
    "*serviceaccount*.json",
    "token.json",
    "tokens.json",
    "*.token",
    ".token",
    "secrets.json",
    "secrets.yaml",
    "secrets.yml",
    "secrets.toml",
    "*.secret",
    "*.secrets",
    ".secrets",
)
"""File-name globs (case-insensitive) of secret-bearing files: never indexed, never read."""

SECRET_DIRS = frozenset({".ssh", ".gnupg", ".aws"})
_SECRET_RE = re.compile("|".join(fnmatch.translate(g) for g in SECRET_GLOBS), re.IGNORECASE)
BINARY_SNIFF = 8192


@dataclass(frozen=True, slots=True)
class FoundFile:
    """One candidate source file found by a walk."""

    path: Path
    language: str
    size: int
    mtime_ns: int


def is_binary(data: bytes) -> bool:
    """True when the first bytes of a file contain a NUL byte."""
    return b"\0" in data[:BINARY_SNIFF]


class FileRules:
    """The index's read rules for a set of workspace roots (thread-safe)."""

    def __init__(self, roots: list[Path], settings: IndexSettings) -> None:
        self.roots = roots
        self.settings = settings
        self._deny = pathspec.PathSpec.from_lines("gitignore", settings.deny_globs)
        self._exclude = pathspec.GitIgnoreSpec.from_lines(settings.exclude_globs)
        self._specs: dict[Path, pathspec.PathSpec[Any] | None] = {}
        self._lock = threading.Lock()

    def invalidate(self) -> None:
        """Forget the cached .gitignore specs (after a .gitignore changed)."""
        with self._lock:
            self._specs.clear()

    def root_of(self, path: Path) -> Path | None:
        """Return the workspace root that contains ``path``, or None."""
        for root in self.roots:
            if path == root or path.is_relative_to(root):
                return root
        return None

    def inside(self, path: Path) -> bool:
        """True when ``path`` really lies in a root (symlinks, in the path too, resolved)."""
        try:
            real = path.resolve()
        except (OSError, RuntimeError):
            return False
        return self.root_of(real) is not None and not self.is_denied(real)

    def is_denied(self, path: Path) -> bool:
        """True for secret-bearing files (built-in list and ``deny_globs``)."""
        if _SECRET_RE.match(path.name):
            return True
        root = self.root_of(path)
        parts = path.relative_to(root).parts if root is not None else path.parts
        if any(part in SECRET_DIRS for part in parts[:-1]):
            return True
        if self.settings.deny_globs:
            rel = "/".join(parts) if root is not None else path.name
            if self._deny.match_file(rel) or self._deny.match_file(path.name):
                return True
        return False

    def _spec(self, directory: Path, root: Path) -> pathspec.PathSpec[Any] | None:
        with self._lock:
            if directory in self._specs:
                return self._specs[directory]
        lines: list[str] = []
        with contextlib.suppress(OSError):
            lines.extend((directory / ".gitignore").read_text("utf-8", "replace").splitlines())
        if directory == root:
            try:
                exclude = directory / ".git" / "info" / "exclude"
                lines.extend(exclude.read_text("utf-8", "replace").splitlines())
            except OSError:
                pass
        spec = (
            pathspec.GitIgnoreSpec.from_lines(lines)
            if any(line.strip() and not line.startswith("#") for line in lines)
            else None
        )
        with self._lock:
            self._specs[directory] = spec
        return spec

    def _ignored_by(
        self, specs: list[tuple[Path, pathspec.PathSpec[Any]]], path: Path, is_dir: bool
    ) -> bool:
        for base, spec in specs:
            rel = path.relative_to(base).as_posix() + ("/" if is_dir else "")
            if spec.match_file(rel):
                return True
        return False

    def _skip_dir(self, name: str, path: Path) -> bool:
        if name in SKIP_DIRS or name.endswith(".egg-info"):
            return True
        return (path / "pyvenv.cfg").exists()

    def is_ignored(self, path: Path) -> bool:
        """True when ``path`` is outside the roots or excluded by the walk's rules."""
        root = self.root_of(path)
        if root is None:
            return True
        rel = path.relative_to(root)
        if self._exclude.match_file(rel.as_posix()):
            return True
        specs: list[tuple[Path, pathspec.PathSpec[Any]]] = []
        current = root
        for part in rel.parts[:-1]:
            spec = self._spec(current, root)
            if spec is not None:
                specs.append((current, spec))
            current = current / part
            if self._skip_dir(part, current) or self._ignored_by(specs, current, True):
                return True
        spec = self._spec(current, root)
        if spec is not None:
            specs.append((current, spec))
        return self._ignored_by(specs, path, False)

    def eligible(self, path: Path) -> FoundFile | None:
        """Return the FoundFile of one path if the index should hold it, else None."""
        lang = language_for_path(path)
        if lang is None or self.is_denied(path) or self.is_ignored(path):
            return None
        try:
            if not self.inside(path):
                return None
            st = path.stat()
        except OSError:
            return None
        if not os.path.isfile(path) or st.st_size > self.settings.max_file_bytes:
            return None
        return FoundFile(path, lang, st.st_size, st.st_mtime_ns)

    def walk(self) -> list[FoundFile]:
        """Return every indexable file under the roots (sorted walk order)."""
        found: list[FoundFile] = []
        visited: set[tuple[int, int]] = set()
        for root in self.roots:
            self._walk_dir(root, root, [], found, visited)
        return found

    def _walk_dir(
        self,
        root: Path,
        directory: Path,
        specs: list[tuple[Path, pathspec.PathSpec[Any]]],
        found: list[FoundFile],
        visited: set[tuple[int, int]],
    ) -> None:
        try:
            st = directory.stat()
        except OSError:
            return
        key = (st.st_dev, st.st_ino)
        if key in visited:
            return
        visited.add(key)
        spec = self._spec(directory, root)
        if spec is not None:
            specs = [*specs, (directory, spec)]
        try:
            with os.scandir(directory) as it:
                entries = sorted(it, key=lambda e: e.name)
        except OSError as exc:
            logger.debug("cannot list %s: %s", directory, exc)
            return
        max_bytes = self.settings.max_file_bytes
        check_exclude = bool(self.settings.exclude_globs)
        subdirs: list[Path] = []
        for entry in entries:
            name = entry.name
            path = directory / name
            try:
                is_link = entry.is_symlink()
                is_dir = entry.is_dir()
            except OSError:
                continue
            if is_link:
                try:
                    target = path.resolve()
                except (OSError, RuntimeError):
                    continue
                if self.root_of(target) is None or self.is_denied(target):
                    continue
            if is_dir:
                if self._skip_dir(name, path):
                    continue
                if specs and self._ignored_by(specs, path, True):
                    continue
                if check_exclude and self._exclude.match_file(
                    path.relative_to(root).as_posix() + "/"
                ):
                    continue
                subdirs.append(path)
                continue
            lang = language_for_path(name)
            if lang is None:
                continue
            if _SECRET_RE.match(name) or (self.settings.deny_globs and self.is_denied(path)):
                continue
            if specs and self._ignored_by(specs, path, False):
                continue
            if check_exclude and self._exclude.match_file(path.relative_to(root).as_posix()):
                continue
            try:
                fst = entry.stat()
            except OSError:
                continue
            if fst.st_size > max_bytes:
                continue
            found.append(FoundFile(path, lang, fst.st_size, fst.st_mtime_ns))
        for sub in subdirs:
            self._walk_dir(root, sub, specs, found, visited)
