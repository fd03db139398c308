"""Languages: tree-sitter grammars, per-thread parsers and the project's query files.

Owns the mapping language id -> grammar wheel (``tree_sitter_python`` ...), the parser
cache (one parser per language per thread: parsers are not thread-safe), and the
query files in ``grammars/<language>/tags.scm``. A query file may start with
``; inherits: other`` to include another language's file first.

The query files live in the repository's top-level ``grammars/``; an installed wheel
carries them as the package data ``lsp_assist/grammars/`` (pyproject.toml maps the
folder in), read through ``importlib.resources``.
"""

from __future__ import annotations

import hashlib
import importlib
import logging
import threading
from functools import cache
from importlib.resources import files
from importlib.resources.abc import Traversable
from pathlib import Path

import tree_sitter

from lsp_assist.errors import IndexError_

logger = logging.getLogger(__name__)


def _grammars_dir() -> Traversable:
    """Return the folder of query files: the installed package data, else the checkout's."""
    packaged = files("lsp_assist") / "grammars"
    if packaged.is_dir():
        return packaged
    # A source checkout (editable install, or the repository on sys.path): the package
    # folder has no grammars/ of its own; the top-level one sits next to it.
    return Path(__file__).resolve().parents[2] / "grammars"


GRAMMARS_DIR: Traversable = _grammars_dir()
"""The project's query files, one folder per language."""

_MODULES: dict[str, tuple[str, str]] = {
    "python": ("tree_sitter_python", "language"),
    "javascript": ("tree_sitter_javascript", "language"),
    "typescript": ("tree_sitter_typescript", "language_typescript"),
    "tsx": ("tree_sitter_typescript", "language_tsx"),
    "go": ("tree_sitter_go", "language"),
    "rust": ("tree_sitter_rust", "language"),
    "java": ("tree_sitter_java", "language"),
    "c": ("tree_sitter_c", "language"),
    "cpp": ("tree_sitter_cpp", "language"),
}

_local = threading.local()


def available_languages() -> list[str]:
    """Return the language ids that have a grammar wheel and a query folder."""
    return [lang for lang in _MODULES if (GRAMMARS_DIR / lang / "tags.scm").is_file()]


@cache
def get_language(lang: str) -> tree_sitter.Language:
    """Return the tree-sitter Language of ``lang`` (raises IndexError_ if unknown)."""
    spec = _MODULES.get(lang)
    if spec is None:
        raise IndexError_(f"unsupported language: {lang}")
    module_name, attr = spec
    try:
        module = importlib.import_module(module_name)
        return tree_sitter.Language(getattr(module, attr)())
    except (ImportError, AttributeError, ValueError, TypeError) as exc:
        raise IndexError_(f"grammar for {lang} cannot be loaded: {exc}") from exc


def get_parser(lang: str) -> tree_sitter.Parser:
    """Return this thread's cached parser for ``lang``."""
    parsers: dict[str, tree_sitter.Parser] | None = getattr(_local, "parsers", None)
    if parsers is None:
        parsers = {}
        _local.parsers = parsers
    parser = parsers.get(lang)
    if parser is None:
        parser = tree_sitter.Parser(get_language(lang))
        parsers[lang] = parser
    return parser


def parse(lang: str, src: bytes, old: tree_sitter.Tree | None = None) -> tree_sitter.Tree:
    """Parse ``src`` with this thread's parser (incrementally from ``old``, edited first)."""
    try:
        parser = get_parser(lang)
        tree = parser.parse(src, old) if old is not None else parser.parse(src)
    except (ValueError, TypeError) as exc:
        raise IndexError_(f"tree-sitter failed to parse {lang}: {exc}") from exc
    if tree is None:  # pragma: no cover - only with a timeout set
        raise IndexError_(f"tree-sitter returned no tree for {lang}")
    return tree


def query_path(lang: str) -> Traversable:
    """Return the resource ``grammars/<lang>/tags.scm``."""
    return GRAMMARS_DIR / lang / "tags.scm"


def query_source(lang: str) -> str:
    """Return the query text of ``lang`` with its ``; inherits:`` files prepended."""
    path = query_path(lang)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise IndexError_(f"no query file for {lang}: {path}") from exc
    first = text.split("\n", 1)[0].strip()
    if first.startswith("; inherits:"):
        parents = [p.strip() for p in first.split(":", 1)[1].split(",") if p.strip()]
        text = "\n".join([*(query_source(p) for p in parents), text])
    return text


@cache
def get_query(lang: str) -> tree_sitter.Query:
    """Return the compiled tags query of ``lang``."""
    try:
        return tree_sitter.Query(get_language(lang), query_source(lang))
    except (tree_sitter.QueryError, ValueError) as exc:
        raise IndexError_(f"bad query file for {lang}: {exc}") from exc


def queries_fingerprint() -> str:
    """Return a hash of every query file (part of the persistent cache key)."""
    digest = hashlib.blake2b(digest_size=8)
    for lang in sorted(_MODULES):
        path = query_path(lang)
        if path.is_file():
            digest.update(lang.encode())
            digest.update(path.read_bytes())
    return digest.hexdigest()
