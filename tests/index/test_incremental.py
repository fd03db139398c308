"""Incremental edits (Document.apply_change -> ByteEdit -> edit_buffer) equal a fresh parse."""

from __future__ import annotations

import os
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lsp_assist.documents.document import Document, Position
from lsp_assist.index import incremental
from lsp_assist.index.extract import extract, summarize
from lsp_assist.index.languages import get_parser
from lsp_assist.index.workspace import WorkspaceIndex

SAMPLES = {
    "python": '''"""Module doc."""
import os
from . import util

LIMIT = 3


class Shape:
    """A shape."""

    sides = 0

    def area(self):
        """Area."""
        # comment
        return 0

    class Inner:
        def deep(self):
            def local():
                return 1

            return local

    def perimeter(self):
        return 1


def build(x):
    return Shape()
''',
    "javascript": """// Top comment.
import { a } from './a';

/** Adds. */
function add(x, y) { return x + y; }

class K {
  // m doc
  m() { return 1; }

  n() { function inner() {} return inner; }
}

export const F = () => 1;
""",
    "go": """// Package p.
package p

import "fmt"

// T is a type.
type T struct{ a int }

// M is a method.
func (t *T) M() { fmt.Println(t.a) }

const C = 1
""",
    "rust": """//! Crate doc.
use crate::a::b;

/// S doc
#[derive(Debug)]
struct S { x: i32 }

impl S {
    /// new doc
    fn new() -> Self { S { x: 1 } }

    fn other(&self) -> i32 { self.x }
}
""",
    "java": """package a.b;

import a.c.D;

/** K doc. */
public class K {
    static final int MAX = 1;

    /** m doc */
    public int m() { return 1; }

    class In { void n() {} }

    public K() {}
}
""",
    "cpp": """#include "a.hpp"

namespace ns {
// C doc
class C {
public:
    int m();
    void n() {}
};
}

int ns::C::m() { return 1; }
""",
    "c": """#include "a.h"
/* adds */
int add(int a, int b) { return a + b; }
struct P { int x; };
#define N 3
""",
}

SUFFIX = {
    "python": ".py",
    "javascript": ".js",
    "go": ".go",
    "rust": ".rs",
    "c": ".c",
    "java": ".java",
    "cpp": ".cpp",
}
FRAGMENTS = [
    "def f(x):\n    ",
    "class A:\n",
    "\n",
    "    ",
    "x",
    "(",
    ")",
    "{",
    "}",
    ":",
    "#",
    "//",
    "/*",
    "*/",
    '"""',
    '"',
    "fn g() {}\n",
    "func h() {}\n",
    "function q() {}\n",
    "int z;\n",
    "é",
    "日本",
    "import os\n",
    " = 1",
]

edit_strategy = st.tuples(
    st.floats(min_value=0, max_value=1),
    st.integers(min_value=0, max_value=12),
    st.lists(st.sampled_from(FRAGMENTS), max_size=3).map("".join),
)


def _fresh(lang: str, text: str, path: Path) -> tuple[str, list[object], list[object], str]:
    src = text.encode("utf-8")
    tree = get_parser(lang).parse(src)
    ext = extract(lang, tree, src, path)
    return (
        str(tree.root_node),
        list(ext.symbols),
        list(ext.imports),
        summarize(lang, tree, src, ext.symbols, ext.imports),
    )


@settings(
    max_examples=int(os.environ.get("LSP_ASSIST_HYPOTHESIS_EXAMPLES", "60")),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    lang=st.sampled_from(sorted(SAMPLES)),
    edits=st.lists(edit_strategy, min_size=1, max_size=8),
)
def test_random_edits_match_fresh_parse(lang: str, edits: list[tuple[float, int, str]]) -> None:
    root = Path("/tmp/lsp-assist-incremental")
    path = root / f"sample{SUFFIX[lang]}"
    text = SAMPLES[lang]
    index = WorkspaceIndex([root])
    doc = Document(path.as_uri(), text)
    index.open_buffer(path, text)
    for where, delete, insert in edits:
        offset = int(where * len(doc.text))
        start = doc.position_at_offset(offset)
        end = doc.position_at_offset(offset + delete)
        byte_edit = doc.apply_change(start, end, insert)
        index.edit_buffer(path, doc.text, byte_edit)
        tree = index.tree_of(path)
        assert tree is not None
        sexp, symbols, imports, summary = _fresh(lang, doc.text, path)
        assert str(tree.root_node) == sexp
        entry = index.file(path)
        assert entry is not None
        assert entry.symbols == symbols
        assert entry.imports == imports
        assert entry.summary == summary
    assert index.text_of(path) == doc.text


def test_full_replacement_edit() -> None:
    path = Path("/tmp/lsp-assist-incremental/full.py")
    index = WorkspaceIndex([path.parent])
    doc = Document(path.as_uri(), "def a():\n    pass\n")
    index.open_buffer(path, doc.text)
    edit = doc.apply_change(None, None, "class B:\n    def c(self):\n        pass\n")
    index.edit_buffer(path, doc.text, edit)
    assert [(s.name, s.kind, s.parent) for s in index.symbols_of(path)] == [
        ("B", "class", None),
        ("c", "method", "B"),
    ]


def test_buffer_wins_over_disk_until_closed(tmp_path: Path) -> None:
    path = tmp_path / "m.py"
    path.write_text("def on_disk():\n    pass\n")
    index = WorkspaceIndex([tmp_path])
    index.scan()
    assert index.lookup("on_disk")
    doc = Document(path.as_uri(), path.read_text())
    index.open_buffer(path, doc.text)
    edit = doc.apply_change(Position(0, 4), Position(0, 11), "in_buffer")
    index.edit_buffer(path, doc.text, edit)
    assert index.lookup("in_buffer") and not index.lookup("on_disk")
    assert index.text_of(path) == doc.text
    index.scan()  # a rescan must not overwrite the buffer's state
    assert index.lookup("in_buffer")
    index.close_buffer(path)
    assert index.lookup("on_disk") and not index.lookup("in_buffer")
    assert index.text_of(path) == path.read_text()


@settings(
    max_examples=int(os.environ.get("LSP_ASSIST_HYPOTHESIS_EXAMPLES", "60")),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    lang=st.sampled_from(sorted(SAMPLES)),
    edits=st.lists(edit_strategy, min_size=1, max_size=8),
)
def test_spliced_symbols_match_full_extraction(
    lang: str, edits: list[tuple[float, int, str]]
) -> None:
    """With the fresh-parse fallback off, the incremental tree is kept even with errors;
    the symbols spliced from the changed region equal a full extraction of that tree,
    and error-free trees equal a fresh parse."""
    root = Path("/tmp/lsp-assist-incremental")
    path = root / f"sample{SUFFIX[lang]}"
    saved = incremental.FRESH_PARSE_ON_ERROR_BYTES
    incremental.FRESH_PARSE_ON_ERROR_BYTES = -1
    try:
        index = WorkspaceIndex([root])
        doc = Document(path.as_uri(), SAMPLES[lang])
        index.open_buffer(path, doc.text)
        for where, delete, insert in edits:
            offset = int(where * len(doc.text))
            byte_edit = doc.apply_change(
                doc.position_at_offset(offset), doc.position_at_offset(offset + delete), insert
            )
            index.edit_buffer(path, doc.text, byte_edit)
            tree = index.tree_of(path)
            assert tree is not None
            src = doc.text.encode("utf-8")
            full = extract(lang, tree, src, path)
            entry = index.file(path)
            assert entry is not None
            assert entry.symbols == full.symbols
            assert entry.imports == full.imports
            sexp, symbols, _imports, _summary = _fresh(lang, doc.text, path)
            if not tree.root_node.has_error and "ERROR" not in sexp and "MISSING" not in sexp:
                assert str(tree.root_node) == sexp
                assert entry.symbols == symbols
    finally:
        incremental.FRESH_PARSE_ON_ERROR_BYTES = saved
