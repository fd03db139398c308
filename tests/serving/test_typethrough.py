"""The type-through cache: typing into a suggestion serves its remainder."""

from __future__ import annotations

import ast
import inspect
import threading
import time

from hypothesis import given
from hypothesis import strategies as st

from lsp_assist.documents import Document, DocumentSnapshot, Position
from lsp_assist.serving.typethrough import TypeThrough, TypeThroughCache

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


# -- TypeThrough: the suggestions still being written ----------------------------------

DOC = Document(URI, BEFORE + AFTER, version=1).snapshot()
AT = DOC.position_at_offset(len(BEFORE))


def _typed(text: str) -> tuple[DocumentSnapshot, Position]:
    """The buffer with ``text`` typed at the cursor, and the cursor after it."""
    doc = Document(URI, BEFORE + text + AFTER, version=2).snapshot()
    return doc, doc.position_at_offset(len(BEFORE) + len(text))


def test_a_waiter_wakes_when_the_suggestion_grows() -> None:
    typethrough = TypeThrough(8)
    key = typethrough.key(DOC, AT)
    typethrough.begin(key)
    typethrough.grow(key, "path")
    found = typethrough.typed_through(*_typed("path"))
    assert found == (key, 4)
    woke: list[tuple[bool, float]] = []

    def wait() -> None:
        more = typethrough.wait_for_more(key, 5.0, than=4)
        woke.append((more, time.perf_counter()))

    waiter = threading.Thread(target=wait)
    waiter.start()
    time.sleep(0.1)  # the waiter is blocked on the condition by now
    assert not woke
    grown_at = time.perf_counter()
    typethrough.grow(key, "path, ")
    waiter.join(5)
    assert woke and woke[0][0], woke
    # released by the grow itself, long before the timeout (with room for a busy machine)
    assert woke[0][1] - grown_at < 0.5, woke[0][1] - grown_at
    assert typethrough.lookup(*_typed("path")) == ", "
    typethrough.end(key)


def test_the_end_of_the_writing_releases_a_waiter_without_more() -> None:
    typethrough = TypeThrough(8)
    key = typethrough.key(DOC, AT)
    typethrough.begin(key)
    typethrough.grow(key, "path")
    threading.Timer(0.05, typethrough.end, (key,)).start()
    began = time.perf_counter()
    assert typethrough.wait_for_more(key, 5.0) is False
    assert time.perf_counter() - began < 1.0
    # nothing being written: no wait at all, and a finished entry is not waited for
    assert typethrough.typed_through(*_typed("path")) is None
    began = time.perf_counter()
    assert typethrough.wait_for_more(key, 5.0) is False
    assert time.perf_counter() - began < 0.5
    with typethrough.writing(key):  # begin ... end
        assert typethrough.typed_through(*_typed("path")) == (key, 4)
    assert typethrough.typed_through(*_typed("path")) is None


def test_a_wait_times_out_when_nothing_comes() -> None:
    typethrough = TypeThrough(8)
    key = typethrough.key(DOC, AT)
    typethrough.begin(key)
    typethrough.grow(key, "path")
    began = time.perf_counter()
    assert typethrough.wait_for_more(key, 0.1) is False
    assert 0.09 <= time.perf_counter() - began < 1.0
    # counters: only lookups count (typed_through and the wait do not)
    assert typethrough.hits == typethrough.misses == 0
    typethrough.end(key)


def test_no_poll_loop_is_left_in_the_type_through_path() -> None:
    # the 5 ms REST_POLL_S loop is gone: nothing sleeps inside a loop in these modules
    import lsp_assist.serving.early as early
    import lsp_assist.serving.scheduler as scheduler
    import lsp_assist.serving.typethrough as typethrough

    assert not hasattr(scheduler, "REST_POLL_S")
    for module in (scheduler, typethrough, early):
        tree = ast.parse(inspect.getsource(module))
        for loop in (n for n in ast.walk(tree) if isinstance(n, (ast.While, ast.For))):
            for node in ast.walk(loop):
                if isinstance(node, ast.Call):
                    func = node.func
                    name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
                    assert name != "sleep", f"{module.__name__}:{node.lineno}: a sleep in a loop"
