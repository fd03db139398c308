"""Per-language fixture workspaces through the real WorkspaceIndex.

In each, a function defined in another file is called at the cursor: its definition
must be in the prompt; an unrelated file with a similar name must not be.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest

from lsp_assist.context.engine import ContextEngine
from lsp_assist.context.model import Cursor
from lsp_assist.context.tokens import ApproxTokenizer
from tests.support.workspace import scanned_index, write_files

from .fakes import GEMMA_LIKE, QWEN_LIKE

CURSOR = "<|>"


@dataclass(frozen=True)
class Fixture:
    language: str
    files: dict[str, str]
    main: str
    definition_marker: str
    unrelated_marker: str


FIXTURES = [
    Fixture(
        "python",
        {
            "app/__init__.py": "",
            "app/checksum.py": (
                '"""Checksums of byte strings."""\n\n\n'
                "def compute_checksum(data):\n"
                '    """Return the rolling checksum of data."""\n'
                "    total = 17\n"
                "    for byte in data:\n"
                "        total = (total * 31 + byte) % 65521\n"
                "    return total\n"
            ),
            "app/checksums_legacy.py": (
                "def compute_checksums(rows):\n    return [LEGACY_SENTINEL for _ in rows]\n"
            ),
            "app/main.py": (
                "from app.checksum import compute_checksum\n\n\n"
                "def run(payload):\n"
                "    data = payload.encode()\n"
                "    value = compute_checksum(<|>\n"
                "    return value\n"
            ),
        },
        "app/main.py",
        "total * 31 + byte",
        "LEGACY_SENTINEL",
    ),
    Fixture(
        "javascript",
        {
            "src/checksum.js": (
                "// Checksums of byte arrays.\n"
                "export function computeChecksum(data) {\n"
                "  let total = 17;\n"
                "  for (const b of data) total = (total * 31 + b) % 65521;\n"
                "  return total;\n"
                "}\n"
            ),
            "src/checksums_legacy.js": (
                "export function computeChecksums(rows) {\n"
                "  return rows.map(() => LEGACY_SENTINEL);\n}\n"
            ),
            "src/main.js": (
                "import { computeChecksum } from './checksum.js';\n\n"
                "export function run(payload) {\n"
                "  const data = Buffer.from(payload);\n"
                "  const value = computeChecksum(<|>\n"
                "  return value;\n"
                "}\n"
            ),
        },
        "src/main.js",
        "total * 31 + b",
        "LEGACY_SENTINEL",
    ),
    Fixture(
        "typescript",
        {
            "src/checksum.ts": (
                "export function computeChecksum(data: Uint8Array): number {\n"
                "  let total = 17;\n"
                "  for (const b of data) total = (total * 31 + b) % 65521;\n"
                "  return total;\n"
                "}\n"
            ),
            "src/checksums_legacy.ts": (
                "export function computeChecksums(rows: number[]): number[] {\n"
                "  return rows.map(() => LEGACY_SENTINEL);\n}\n"
            ),
            "src/main.ts": (
                "import { computeChecksum } from './checksum';\n\n"
                "export function run(payload: string): number {\n"
                "  const data = new TextEncoder().encode(payload);\n"
                "  const value = computeChecksum(<|>\n"
                "  return value;\n"
                "}\n"
            ),
        },
        "src/main.ts",
        "total * 31 + b",
        "LEGACY_SENTINEL",
    ),
    Fixture(
        "go",
        {
            "go.mod": "module example.com/app\n\ngo 1.22\n",
            "checksum/checksum.go": (
                "package checksum\n\n"
                "// ComputeChecksum returns the rolling checksum of data.\n"
                "func ComputeChecksum(data []byte) uint32 {\n"
                "\ttotal := uint32(17)\n"
                "\tfor _, b := range data {\n"
                "\t\ttotal = (total*31 + uint32(b)) % 65521\n"
                "\t}\n"
                "\treturn total\n"
                "}\n"
            ),
            "checksums_legacy/legacy.go": (
                "package checksums_legacy\n\n"
                "func ComputeChecksums(rows []int) []int {\n\treturn LEGACY_SENTINEL\n}\n"
            ),
            "main.go": (
                "package main\n\n"
                'import "example.com/app/checksum"\n\n'
                "func run(payload string) uint32 {\n"
                "\tdata := []byte(payload)\n"
                "\tvalue := checksum.ComputeChecksum(<|>\n"
                "\treturn value\n"
                "}\n"
            ),
        },
        "main.go",
        "total*31 + uint32(b)",
        "LEGACY_SENTINEL",
    ),
    Fixture(
        "rust",
        {
            "Cargo.toml": '[package]\nname = "app"\nversion = "0.1.0"\n',
            "src/checksum.rs": (
                "/// Rolling checksum of data.\n"
                "pub fn compute_checksum(data: &[u8]) -> u32 {\n"
                "    let mut total: u32 = 17;\n"
                "    for b in data {\n"
                "        total = (total * 31 + *b as u32) % 65521;\n"
                "    }\n"
                "    total\n"
                "}\n"
            ),
            "src/checksums_legacy.rs": (
                "pub fn compute_checksums(rows: &[u32]) -> Vec<u32> {\n    LEGACY_SENTINEL\n}\n"
            ),
            "src/main.rs": (
                "mod checksum;\n\n"
                "use checksum::compute_checksum;\n\n"
                "fn run(payload: &str) -> u32 {\n"
                "    let data = payload.as_bytes();\n"
                "    let value = compute_checksum(<|>\n"
                "    value\n"
                "}\n"
            ),
        },
        "src/main.rs",
        "total * 31 + *b as u32",
        "LEGACY_SENTINEL",
    ),
    Fixture(
        "java",
        {
            "src/main/java/app/Checksum.java": (
                "package app;\n\n"
                "public class Checksum {\n"
                "    /** Rolling checksum of data. */\n"
                "    public static int computeChecksum(byte[] data) {\n"
                "        int total = 17;\n"
                "        for (byte b : data) total = (total * 31 + b) % 65521;\n"
                "        return total;\n"
                "    }\n"
                "}\n"
            ),
            "src/main/java/app/ChecksumsLegacy.java": (
                "package app;\n\npublic class ChecksumsLegacy {\n"
                "    public static int[] computeChecksums(int[] rows) {\n"
                "        return LEGACY_SENTINEL;\n    }\n}\n"
            ),
            "src/main/java/app/Main.java": (
                "package app;\n\n"
                "import app.Checksum;\n\n"
                "public class Main {\n"
                "    static int run(String payload) {\n"
                "        byte[] data = payload.getBytes();\n"
                "        int value = Checksum.computeChecksum(<|>\n"
                "        return value;\n"
                "    }\n"
                "}\n"
            ),
        },
        "src/main/java/app/Main.java",
        "total * 31 + b",
        "LEGACY_SENTINEL",
    ),
    Fixture(
        "c",
        {
            "checksum.h": "unsigned compute_checksum(const unsigned char *data, int n);\n",
            "checksum.c": (
                '#include "checksum.h"\n\n'
                "unsigned compute_checksum(const unsigned char *data, int n) {\n"
                "    unsigned total = 17;\n"
                "    for (int i = 0; i < n; i++) total = (total * 31 + data[i]) % 65521;\n"
                "    return total;\n"
                "}\n"
            ),
            "checksums_legacy.c": (
                "int compute_checksums(int *rows, int n) {\n    return LEGACY_SENTINEL;\n}\n"
            ),
            "main.c": (
                '#include "checksum.h"\n\n'
                "unsigned run(const char *payload, int n) {\n"
                "    const unsigned char *data = (const unsigned char *)payload;\n"
                "    unsigned value = compute_checksum(<|>\n"
                "    return value;\n"
                "}\n"
            ),
        },
        "main.c",
        "total * 31 + data[i]",
        "LEGACY_SENTINEL",
    ),
    Fixture(
        "cpp",
        {
            "checksum.hpp": (
                "#pragma once\n#include <vector>\n\n"
                "namespace app {\n"
                "unsigned compute_checksum(const std::vector<unsigned char>& data);\n}\n"
            ),
            "checksum.cpp": (
                '#include "checksum.hpp"\n\n'
                "namespace app {\n"
                "unsigned compute_checksum(const std::vector<unsigned char>& data) {\n"
                "    unsigned total = 17;\n"
                "    for (auto b : data) total = (total * 31 + b) % 65521;\n"
                "    return total;\n"
                "}\n"
                "}  // namespace app\n"
            ),
            "checksums_legacy.cpp": (
                "namespace app {\nint compute_checksums(int n) { return LEGACY_SENTINEL; }\n}\n"
            ),
            "main.cpp": (
                '#include "checksum.hpp"\n#include <string>\n\n'
                "unsigned run(const std::string& payload) {\n"
                "    std::vector<unsigned char> data(payload.begin(), payload.end());\n"
                "    unsigned value = app::compute_checksum(<|>\n"
                "    return value;\n"
                "}\n"
            ),
        },
        "main.cpp",
        "total * 31 + b",
        "LEGACY_SENTINEL",
    ),
]


def _write(root: Path, fixture: Fixture) -> tuple[Path, str, int, int]:
    marked = fixture.files[fixture.main]
    offset = marked.index(CURSOR)
    main_text = marked.replace(CURSOR, "")
    line = marked.count("\n", 0, offset)
    col = offset - (marked.rfind("\n", 0, offset) + 1)
    write_files(root, {**fixture.files, fixture.main: main_text})
    return root / fixture.main, main_text, line, col


@pytest.mark.parametrize("model", [GEMMA_LIKE, QWEN_LIKE], ids=["comment", "fim"])
@pytest.mark.parametrize("fixture", FIXTURES, ids=lambda f: f.language)
def test_called_definition_in_prompt(tmp_path: Path, fixture: Fixture, model) -> None:
    main, text, line, col = _write(tmp_path, fixture)
    index = scanned_index(tmp_path)
    engine = ContextEngine(
        index, ApproxTokenizer(model.special_tokens), model, relative=index.relative
    )
    cursor = Cursor(
        path=main.resolve(), language=fixture.language, text=text, line=line, column=col
    )
    prompt = engine.build(cursor)
    assert fixture.definition_marker in prompt.prompt, prompt.prompt
    assert fixture.unrelated_marker not in prompt.prompt
    assert "legacy" not in prompt.prompt.lower()
    assert prompt.total_tokens <= prompt.budget


def test_denied_files_never_reach_the_prompt(tmp_path: Path) -> None:
    from .conftest import CART, FILES

    files = {**FILES, ".env": "API_TOKEN=env-secret-value\n"}
    index = scanned_index(tmp_path, files, deny_globs=["**/secrets.py"])
    secrets = (tmp_path / "shop" / "secrets.py").resolve()
    assert index.is_denied(secrets) and index.is_denied((tmp_path / ".env").resolve())
    engine = ContextEngine(
        index, ApproxTokenizer(GEMMA_LIKE.special_tokens), GEMMA_LIKE, relative=index.relative
    )
    engine.note_opened(secrets)
    engine.note_opened((tmp_path / ".env").resolve())
    offset = CART.index("creds = load_credentials(") + len("creds = load_credentials(")
    line = CART.count("\n", 0, offset)
    col = offset - (CART.rfind("\n", 0, offset) + 1)
    cursor = Cursor(
        path=(tmp_path / "shop" / "cart.py").resolve(),
        language="python",
        text=CART,
        line=line,
        column=col,
        open_files=(secrets, (tmp_path / ".env").resolve()),
    )
    for strategy in ("layered", "baseline"):
        prompt = engine.build(cursor, strategy=strategy)
        assert "hunter2" not in prompt.prompt and "sk-very-secret" not in prompt.prompt
        assert "env-secret-value" not in prompt.prompt
        assert "secrets.py" not in prompt.prompt
