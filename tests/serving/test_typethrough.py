"""The type-through cache: typing into a suggestion serves its remainder."""

from __future__ import annotations

import threading
import time

from hypothesis import given
from hypothesis import strategies as st

from lsp_assist.serving.typethrough import TypeThroughCache

URI = "file:///w/app.py"
BEFORE = "import os\n\ndef load(path):\n    with open("
AFTER = ")\n\nprint(load('x'))\n"


def test_exact_context_returns_whole_suggestion() -> None:
    cache = TypeThroughCache(8)
    cache.put(URI, BEFORE, AFTER, "path) as fh:")
    assert cache.get(URI, BEFORE, AFTER) == "path) as fh:"
    assert cache.hits == 1 and cache.misses == 0


def test_typing_the_suggestion_serves_the_rest() -> None:
    cache = TypeThroughCache(8)
    suggestion = "path, encoding='utf-8'"
    cache.put(URI, BEFORE, AFTER, suggestion)
    for n in range(1, len(suggestion)):
        assert cache.get(URI, BEFORE + suggestion[:n], AFTER) == suggestion[n:]
    assert cache.hits == len(suggestion) - 1


def test_typed_through_all_of_it_is_a_miss() -> None:
    cache = TypeThroughCache(8)
    cache.put(URI, BEFORE, AFTER, "path")
    assert cache.get(URI, BEFORE + "path", AFTER) is None
    assert cache.get(URI, BEFORE + "paths", AFTER) is None
    assert cache.misses == 2


def test_diverging_keystroke_misses() -> None:
    cache = TypeThroughCache(8)
    cache.put(URI, BEFORE, AFTER, "path")
    assert cache.get(URI, BEFORE + "pf", AFTER) is None
    assert cache.get(URI, BEFORE + "x", AFTER) is None
    assert cache.hits == 0 and cache.misses == 2


def test_backspace_into_the_original_prefix_misses() -> None:
    cache = TypeThroughCache(8)
    cache.put(URI, BEFORE, AFTER, "path")
    assert cache.get(URI, BEFORE[:-1], AFTER) is None


def test_changed_suffix_or_earlier_text_misses() -> None:
    cache = TypeThroughCache(8)
    cache.put(URI, BEFORE, AFTER, "path")
    assert cache.get(URI, BEFORE + "p", AFTER + "# edited\n") is None
    edited = BEFORE.replace("import os", "import sys")
    assert cache.get(URI, edited + "p", AFTER) is None
    assert cache.get("file:///w/other.py", BEFORE + "p", AFTER) is None


def test_javascript_and_go_multiline_suggestions() -> None:
    cache = TypeThroughCache(8)
    js_before = "function add(a, b) {\n  "
    js_after = "\n}\n"
    cache.put("file:///w/a.js", js_before, js_after, "const s = a + b;\n  return s;")
    typed = "const s = a + b;\n  "
    assert cache.get("file:///w/a.js", js_before + typed, js_after) == "return s;"
    go_before = "package m\n\nfunc f() error {\n\t"
    cache.put("file:///w/m.go", go_before, "\n}\n", "if err != nil {\n\t\treturn err\n\t}")
    assert cache.get("file:///w/m.go", go_before + "if err", "\n}\n") == (
        " != nil {\n\t\treturn err\n\t}"
    )


def test_newest_context_wins() -> None:
    cache = TypeThroughCache(8)
    cache.put(URI, BEFORE, AFTER, "path)")
    # A later request made after typing "pa" produced a different continuation.
    cache.put(URI, BEFORE + "pa", AFTER, "th_to_config")
    assert cache.get(URI, BEFORE + "pat", AFTER) == "h_to_config"


def test_lru_eviction_and_invalidate() -> None:
    cache = TypeThroughCache(2)
    cache.put(URI, "a", "", "1")
    cache.put(URI, "b", "", "2")
    assert cache.get(URI, "a", "") == "1"  # a is now the most recent
    cache.put(URI, "c", "", "3")  # evicts b
    assert len(cache) == 2
    assert cache.get(URI, "b", "") is None
    assert cache.get(URI, "a", "") == "1" and cache.get(URI, "c", "") == "3"
    cache.invalidate(URI)
    assert len(cache) == 0 and cache.get(URI, "a", "") is None
    assert cache.stats() == {"entries": 0, "hits": 3, "misses": 2}
    cache.clear()
    assert cache.stats() == {"entries": 0, "hits": 0, "misses": 0}


def test_empty_suggestion_not_stored() -> None:
    cache = TypeThroughCache(4)
    cache.put(URI, BEFORE, AFTER, "")
    assert len(cache) == 0


def test_no_document_text_is_kept() -> None:
    cache = TypeThroughCache(4)
    cache.put(URI, "SECRET_TOKEN = 'abc'\n", "", "x")
    assert "SECRET_TOKEN" not in repr(vars(cache))


def test_fast_on_a_large_document() -> None:
    cache = TypeThroughCache(256)
    before = "x = 1\n" * 20_000  # 120 KB
    for i in range(200):
        cache.put(f"file:///w/{i}.py", before, "", "value")
    cache.put(URI, before, "", "print(value)")
    started = time.perf_counter()
    for n in range(1, 10):
        assert cache.get(URI, before + "print(value)"[:n], "") is not None
    per_call_ms = (time.perf_counter() - started) * 1000 / 9
    assert per_call_ms < 10


def test_thread_safety() -> None:
    cache = TypeThroughCache(64)

    def worker(t: int) -> None:
        for i in range(300):
            cache.put(URI, f"{t}-{i}", "", "abc")
            cache.get(URI, f"{t}-{i}a", "")

    threads = [threading.Thread(target=worker, args=(t,)) for t in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert len(cache) == 64
    assert cache.hits + cache.misses == 1200


@given(
    before=st.text(max_size=30),
    after=st.text(max_size=10),
    suggestion=st.text(min_size=1, max_size=20),
    typed_len=st.integers(0, 25),
)
def test_property_remainder(before: str, after: str, suggestion: str, typed_len: int) -> None:
    cache = TypeThroughCache(4)
    cache.put(URI, before, after, suggestion)
    typed = suggestion[:typed_len]
    got = cache.get(URI, before + typed, after)
    if len(typed) < len(suggestion):
        assert got is not None and typed + got == suggestion
    else:
        assert got is None


def test_editor_auto_closed_bracket() -> None:
    cache = TypeThroughCache(8)
    before = "x = "
    cache.put(URI, before, "\n", "foo(a, b)")
    # The user types "foo(" and the editor inserts ")" right of the cursor.
    assert cache.get(URI, before + "foo(", ")\n") == "a, b"
    assert cache.get(URI, before + "foo(a", ")\n") == ", b"
    # Typing over the auto-inserted ")" restores the suffix: the plain rule again.
    assert cache.get(URI, before + "foo(a, b", "\n") == ")"
    # An auto-inserted closer the suggestion does not end with is a miss.
    cache.put(URI, "y = ", "\n", "bar(1) + 2")
    assert cache.get(URI, "y = bar(", ")\n") is None
