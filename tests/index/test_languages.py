"""Per-language symbol extraction, summaries and import resolution on small fixtures."""

from __future__ import annotations

from pathlib import Path

import pytest

from lsp_assist.index.languages import available_languages, get_parser, query_path
from lsp_assist.index.model import IndexLookup
from lsp_assist.index.workspace import WorkspaceIndex

FIXTURES = Path(__file__).parent / "fixtures"


def _index(lang: str) -> WorkspaceIndex:
    index = WorkspaceIndex([FIXTURES / lang])
    index.scan()
    return index


def _syms(index: WorkspaceIndex, rel: str) -> set[tuple[str, str, str | None]]:
    root = index.roots[0]
    return {(s.name, s.kind, s.parent) for s in index.symbols_of(root / rel)}


def _resolved(index: WorkspaceIndex, rel: str) -> dict[str, str | None]:
    root = index.roots[0]
    entry = index.file(root / rel)
    assert entry is not None
    out: dict[str, str | None] = {}
    for imp in entry.imports:
        target = index.resolve_import(root / rel, imp)
        out[imp.module] = index.relative(target) if target else None
    return out


def test_available_languages() -> None:
    langs = available_languages()
    for lang in ("python", "javascript", "typescript", "tsx", "go", "rust", "java", "c", "cpp"):
        assert lang in langs
        assert query_path(lang).is_file()
        assert get_parser(lang).parse(b"").root_node is not None


def test_satisfies_protocol() -> None:
    index: IndexLookup = WorkspaceIndex([FIXTURES / "python"])
    assert index.lookup("nothing") == []


def test_python() -> None:
    index = _index("python")
    syms = _syms(index, "pkg/core.py")
    assert {
        ("MAX_SPEED", "constant", None),
        ("default_name", "variable", None),
        ("Engine", "class", None),
        ("wheels", "variable", "Engine"),
        ("start", "method", "Engine"),
        ("build", "function", None),
    } <= syms
    start = next(s for s in index.lookup("start"))
    assert start.signature == "def start(self, speed: int = MAX_SPEED) -> bool:"
    assert start.doc == "Start the engine."
    assert (start.start_line, start.end_line) == (17, 26)
    entry = index.file(index.roots[0] / "pkg/core.py")
    assert entry is not None and entry.summary == "Core engine of the demo package."
    assert _resolved(index, "pkg/core.py") == {
        "os": None,
        "": "pkg/util.py",
        "util": "pkg/util.py",
    }
    assert _resolved(index, "app.py") == {
        "pkg.core": "pkg/core.py",
        "pkg.util": "pkg/util.py",
        "pkg": "pkg/__init__.py",
        "missing_mod": None,
    }
    assert _resolved(index, "pkg/sub/deep.py") == {"core": "pkg/core.py", "": "pkg/util.py"}
    importers = {index.relative(p) for p in index.importers_of(index.roots[0] / "pkg/util.py")}
    assert importers == {"app.py", "pkg/core.py", "pkg/sub/deep.py"}
    from_util = [i.names for i in entry.imports if i.module == "util" and i.level == 1]
    assert from_util == [("Helper",), ("helper",)]


def test_javascript() -> None:
    index = _index("javascript")
    assert {
        ("add", "function", None),
        ("PI", "constant", None),
        ("Calc", "class", None),
        ("mul", "method", "Calc"),
    } <= _syms(index, "src/math.js")
    assert ("run", "function", None) in _syms(index, "src/index.js")
    add = index.lookup("add")[0]
    assert add.doc == "Adds two numbers."
    assert _resolved(index, "src/index.js") == {
        "./math": "src/math.js",
        "./lib": "src/lib/index.js",
        "./util/format.js": "src/util/format.js",
    }
    assert [index.relative(p) for p in index.importers_of(index.roots[0] / "src/math.js")] == [
        "src/index.js"
    ]


def test_typescript_and_tsx() -> None:
    index = _index("typescript")
    syms = _syms(index, "src/shapes.ts")
    assert {
        ("Shape", "interface", None),
        ("describe", "method", "Shape"),
        ("Size", "type", None),
        ("Color", "enum", None),
        ("Base", "class", None),
        ("draw", "method", "Base"),
        ("Geo", "module", None),
        ("origin", "function", "Geo"),
        ("DEFAULT_SIZE", "constant", None),
    } <= syms
    assert {
        ("Props", "interface", None),
        ("Button", "function", None),
        ("Small", "function", None),
    } <= _syms(index, "src/components/Button.tsx")
    assert index.file(index.roots[0] / "src/components/Button.tsx").language == "tsx"  # type: ignore[union-attr]
    assert _resolved(index, "src/main.ts") == {
        "./shapes": "src/shapes.ts",
        "./api": "src/api/index.ts",
        "./components/Button.js": "src/components/Button.tsx",
    }


def test_go() -> None:
    index = _index("go")
    assert {
        ("Pi", "constant", None),
        ("Origin", "variable", None),
        ("Point", "struct", None),
        ("Shape", "interface", None),
        ("Meters", "type", None),
        ("New", "function", None),
        ("Dist", "method", "Point"),
    } <= _syms(index, "geom/geom.go")
    assert index.lookup("Dist")[0].doc == "Dist is the distance to the origin."
    resolved = _resolved(index, "main.go")
    assert resolved['"example.com/demo/geom"'] == "geom/geom.go"
    assert resolved['"fmt"'] is None
    assert [index.relative(p) for p in index.importers_of(index.roots[0] / "geom/geom.go")] == [
        "main.go"
    ]


def test_rust() -> None:
    index = _index("rust")
    assert {
        ("Circle", "struct", None),
        ("new", "method", "Circle"),
        ("area", "method", "Circle"),
        ("Area", "interface", None),
        ("Kind", "enum", None),
        ("MAX", "constant", None),
    } <= _syms(index, "src/shapes.rs")
    assert {("shapes", "module", None), ("make", "function", None)} <= _syms(index, "src/lib.rs")
    new = next(s for s in index.lookup("new"))
    assert new.doc == "Makes a circle."
    circle = next(s for s in index.lookup("Circle"))
    assert circle.doc == "A circle."
    assert _resolved(index, "src/lib.rs") == {
        "self::shapes": "src/shapes.rs",
        "self::util": "src/util/mod.rs",
        "crate::shapes": "src/shapes.rs",
        "std": None,
    }
    assert _resolved(index, "src/shapes.rs") == {
        "super::util": "src/util/mod.rs",
        "crate::util": "src/util/mod.rs",
    }


def test_java() -> None:
    index = _index("java")
    base = "src/main/java/com/example/"
    assert {
        ("User", "class", None),
        ("MAX_NAME", "constant", "User"),
        ("name", "variable", "User"),
        ("getName", "method", "User"),
    } <= _syms(index, base + "model/User.java")
    assert {("Role", "enum", None), ("Named", "interface", None)} <= _syms(
        index, base + "model/Role.java"
    )
    resolved = _resolved(index, base + "App.java")
    assert resolved["com.example.model.User"] == base + "model/User.java"
    assert resolved["java.util.List"] is None
    importers = index.importers_of(index.roots[0] / (base + "model/Role.java"))
    assert [index.relative(p) for p in importers] == [base + "App.java"]


def test_c() -> None:
    index = _index("c")
    assert {
        ("UTIL_MAX", "constant", None),
        ("SQUARE", "function", None),
        ("point", "struct", None),
        ("point_t", "type", None),
        ("color", "enum", None),
        ("add", "function", None),
    } <= _syms(index, "util.h")
    assert {
        ("add", "function", None),
        ("name", "function", None),
        ("counter", "variable", None),
    } <= _syms(index, "util.c")
    assert _resolved(index, "main.c") == {"<stdio.h>": None, '"util.h"': "util.h"}
    importers = index.importers_of(index.roots[0] / "util.h")
    assert [index.relative(p) for p in importers] == ["main.c", "util.c"]


def test_cpp() -> None:
    index = _index("cpp")
    assert {
        ("geo", "module", None),
        ("Circle", "class", "geo"),
        ("area", "method", "Circle"),
        ("Box", "struct", "geo"),
        ("Radius", "type", "geo"),
    } <= _syms(index, "src/shapes.hpp")
    assert {("area", "method", "Circle"), ("twice", "function", None)} <= _syms(
        index, "src/shapes.cpp"
    )
    assert _resolved(index, "src/main.cpp") == {'"shapes.hpp"': "src/shapes.hpp", "<vector>": None}


@pytest.mark.parametrize(
    ("lang", "rel", "expected"),
    [
        ("python", "pkg/util.py", "Small helpers used by the core."),
        ("python", "pkg/sub/deep.py", "Defines functions use"),
        ("python", "app.py", "Uses missing_mod, pkg.core, pkg, pkg.util"),
        ("go", "geom/geom.go", "Package geom has points."),
        ("rust", "src/lib.rs", "Demo crate."),
        ("javascript", "src/math.js", "Math helpers for the demo."),
        ("cpp", "src/shapes.hpp", "Shapes for the demo."),
    ],
)
def test_summaries(lang: str, rel: str, expected: str) -> None:
    index = _index(lang)
    entry = index.file(index.roots[0] / rel)
    assert entry is not None and entry.summary == expected


def test_lookup_prefix_and_relative() -> None:
    index = _index("python")
    names = {s.name for s in index.lookup_prefix("he")}
    assert names == {"helper"}
    assert [s.name for s in index.lookup_prefix("", limit=3)].__len__() == 3
    assert index.relative(index.roots[0] / "pkg" / "core.py") == "pkg/core.py"
    two = WorkspaceIndex([FIXTURES / "python", FIXTURES / "go"])
    assert two.relative(FIXTURES / "go" / "main.go") == "go/main.go"
