"""Test doubles: an in-memory index for Python sources (ast-based) and model infos."""

from __future__ import annotations

import ast
import fnmatch
from pathlib import Path

from lsp_assist.backends.base import ModelInfo
from lsp_assist.index.model import FileEntry, Import, Symbol


class FakeIndex:
    """A tiny IndexLookup over in-memory Python files, symbols found with ``ast``."""

    def __init__(self, root: Path, files: dict[str, str], deny: tuple[str, ...] = ()) -> None:
        self.root = root
        self.roots = [root]
        self.texts = {root / name: text for name, text in files.items()}
        self.deny = deny
        self.entries: dict[Path, FileEntry] = {}
        for path, text in self.texts.items():
            self.entries[path] = self._extract(path, text)

    def relative(self, path: Path) -> str:
        return path.relative_to(self.root).as_posix()

    def _extract(self, path: Path, text: str) -> FileEntry:
        entry = FileEntry(path=path, language="python")
        try:
            tree = ast.parse(text)
        except SyntaxError:
            return entry
        doc = ast.get_docstring(tree)
        entry.summary = doc.splitlines()[0] if doc else ""
        lines = text.split("\n")

        def add(node: ast.AST, parent: str | None) -> None:
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                kind = (
                    "class"
                    if isinstance(node, ast.ClassDef)
                    else ("method" if parent else "function")
                )
                d = ast.get_docstring(node)
                entry.symbols.append(
                    Symbol(
                        name=node.name,
                        kind=kind,  # type: ignore[arg-type]
                        path=path,
                        start_line=node.lineno - 1,
                        end_line=(node.end_lineno or node.lineno) - 1,
                        parent=parent,
                        signature=lines[node.lineno - 1].strip(),
                        doc=d.splitlines()[0] if d else "",
                    )
                )
                if isinstance(node, ast.ClassDef):
                    for child in node.body:
                        add(child, node.name)
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    entry.imports.append(Import(module=alias.name, line=node.lineno - 1))
            elif isinstance(node, ast.ImportFrom):
                entry.imports.append(
                    Import(
                        module=node.module or "",
                        names=tuple(a.name for a in node.names),
                        line=node.lineno - 1,
                        level=node.level,
                    )
                )

        for node in tree.body:
            add(node, None)
        return entry

    def set_text(self, rel: str, text: str) -> None:
        path = self.root / rel
        self.texts[path] = text
        self.entries[path] = self._extract(path, text)

    def file(self, path: Path) -> FileEntry | None:
        return self.entries.get(path)

    def lookup(self, name: str) -> list[Symbol]:
        return [s for e in self.entries.values() for s in e.symbols if s.name == name]

    def lookup_prefix(self, prefix: str, limit: int = 50) -> list[Symbol]:
        out = [s for e in self.entries.values() for s in e.symbols if s.name.startswith(prefix)]
        return out[:limit]

    def symbols_of(self, path: Path) -> list[Symbol]:
        entry = self.entries.get(path)
        return list(entry.symbols) if entry else []

    def resolve_import(self, from_path: Path, imp: Import) -> Path | None:
        base = from_path.parent
        if imp.level:
            for _ in range(imp.level - 1):
                base = base.parent
            parts = imp.module.split(".") if imp.module else []
        else:
            base = self.root
            parts = imp.module.split(".")
        cand = base.joinpath(*parts).with_suffix(".py") if parts else base / "__init__.py"
        if cand in self.texts:
            return cand
        pkg = base.joinpath(*parts) / "__init__.py"
        return pkg if pkg in self.texts else None

    def importers_of(self, path: Path) -> list[Path]:
        out = []
        for p, e in self.entries.items():
            if any(self.resolve_import(p, i) == path for i in e.imports):
                out.append(p)
        return sorted(out)

    def text_of(self, path: Path) -> str | None:
        if self.is_denied(path):
            return None
        return self.texts.get(path)

    def is_denied(self, path: Path) -> bool:
        rel = self.relative(path) if path.is_relative_to(self.root) else path.name
        return any(fnmatch.fnmatch(rel, g) or fnmatch.fnmatch(path.name, g) for g in self.deny)

    def tree_of(self, path: Path) -> None:
        return None


GEMMA_LIKE = ModelInfo(path="gemma.gguf", bos_id=2, eos_id=1, special_tokens={"<bos>": 2})
SMOLLM_LIKE = ModelInfo(
    path="smol.gguf",
    bos_id=1,
    eos_id=2,
    special_tokens={"<|im_start|>": 1, "<repo_name>": 3, "<file_sep>": 5, "<filename>": 6},
)
QWEN_LIKE = ModelInfo(
    path="qwen.gguf",
    bos_id=151643,
    eos_id=151643,
    fim_prefix_id=151659,
    fim_suffix_id=151661,
    fim_middle_id=151660,
    special_tokens={
        "<|endoftext|>": 151643,
        "<|fim_prefix|>": 151659,
        "<|fim_middle|>": 151660,
        "<|fim_suffix|>": 151661,
        "<|repo_name|>": 151663,
        "<|file_sep|>": 151664,
    },
)
CODESTRAL_LIKE = ModelInfo(
    path="codestral.gguf",
    bos_id=1,
    eos_id=2,
    fim_prefix_id=32,
    fim_suffix_id=33,
    special_tokens={"<s>": 1, "</s>": 2, "[PREFIX]": 32, "[SUFFIX]": 33},
)
CODELLAMA_LIKE = ModelInfo(
    path="codellama.gguf",
    bos_id=1,
    eos_id=2,
    fim_prefix_id=32007,
    fim_suffix_id=32008,
    fim_middle_id=32009,
    special_tokens={"<s>": 1, "</s>": 2, "▁<PRE>": 32007, "▁<SUF>": 32008, "▁<MID>": 32009},
)
