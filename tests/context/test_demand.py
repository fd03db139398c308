"""What the line being written asks of the related layer (context/retrieval/demand.py).

A fixture workspace goes through the real WorkspaceIndex; the engine builds with an
approximate tokenizer and Qwen's FIM tokens. Each piece is behind a setting, so every
test shows the prompt with the setting on and, for contrast, what today's default puts
there (the definition missing, or the layers holding other files' code).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from lsp_assist.config import ContextSettings, parse_settings
from lsp_assist.context.engine import ContextEngine
from lsp_assist.context.memory import PromptMemory
from lsp_assist.context.model import AssembledPrompt, Cursor, LayerItem
from lsp_assist.context.retrieval import parse_pin
from lsp_assist.context.retrieval.demand import (
    attribute_types,
    binds,
    line_names,
    receiver_chain,
    type_heads,
    variable_types,
)
from lsp_assist.context.tokens import ApproxTokenizer
from tests.support.workspace import scanned_index

from .fakes import QWEN_LIKE

CURSOR = "<|>"

STORE = '''"""Where sessions are kept."""


class SessionStore:
    """Keeps each session's messages under a root folder."""

    def __init__(self, root: str, *, limit: int = 100) -> None:
        self.root = root
        self.limit = limit
        self.entries: dict[str, list[str]] = {}
        self.writes = 0

    def load_messages(self, session_id: str, *, newest_first: bool = False) -> list[str]:
        messages = self.entries.get(session_id, [])
        return list(reversed(messages)) if newest_first else list(messages)

    def append_message(self, session_id: str, message: str, *, flush: bool = True) -> None:
        self.entries.setdefault(session_id, []).append(message)
        self.writes += 1

    def delete_session(self, session_id: str) -> bool:
        return self.entries.pop(session_id, None) is not None

    def list_sessions(self, prefix: str = "", *, include_empty: bool = False) -> list[str]:
        return sorted(k for k, v in self.entries.items() if k.startswith(prefix))


def open_store(root: str) -> SessionStore:
    """Open the store under ``root``."""
    return SessionStore(root)
'''

TOOLS = '''"""Tools an agent may call."""

DEFAULT_TIMEOUT = 30


def run_tool(name, args):
    return {"tool": name, "args": args}


def describe_tool(name):
    return f"tool {name}"


def validate_arguments(name, args):
    return bool(name) and isinstance(args, dict)


def tool_names():
    return ["search", "fetch"]
'''

AGENT = '''"""The agent loop."""
from app.store import SessionStore
from app.tools import DEFAULT_TIMEOUT, describe_tool, run_tool, tool_names, validate_arguments


class Agent:
    def __init__(self, root):
        self._session = SessionStore(root)
        self.calls = 0

    def describe(self):
        names = tool_names()
        return [describe_tool(name) for name in names]

    def check(self, name, args):
        if not validate_arguments(name, args):
            raise ValueError(name)
        return True

    def call(self, name, args):
        self.calls += 1
        return run_tool(name, args)

    def remember(self, session_id, reply):
        count = len(reply)
        <|>
'''


def workspace(tmp_path: Path, main: str = AGENT) -> tuple[Any, Cursor]:
    """Write the fixture, scan it, and return the index and the cursor (at ``<|>``)."""
    offset = main.index(CURSOR)
    text = main.replace(CURSOR, "")
    files = {
        "app/__init__.py": "",
        "app/store.py": STORE,
        "app/tools.py": TOOLS,
        "app/agent.py": text,
    }
    index = scanned_index(tmp_path, files)
    line = main.count("\n", 0, offset)
    column = offset - (main.rfind("\n", 0, offset) + 1)
    path = (tmp_path / "app" / "agent.py").resolve()
    return index, Cursor(path=path, language="python", text=text, line=line, column=column)


def typed(cursor: Cursor, text: str) -> Cursor:
    """Return the cursor after ``text`` is typed at it."""
    lines = cursor.text.split("\n")
    line = lines[cursor.line]
    lines[cursor.line] = line[: cursor.column] + text + line[cursor.column :]
    return dataclasses.replace(cursor, text="\n".join(lines), column=cursor.column + len(text))


def engine(index: Any, **values: Any) -> ContextEngine:
    settings, warnings = parse_settings({"contextBudget": 1024, **values})
    assert warnings == []
    return ContextEngine(
        index,
        ApproxTokenizer(QWEN_LIKE.special_tokens),
        QWEN_LIKE,
        settings.context,
        relative=index.relative,
    )


def related(prompt: AssembledPrompt) -> dict[str, LayerItem]:
    layer = next(x for x in prompt.layers if x.name == "related")
    return {item.symbol: item for item in layer.items}


def layer_tokens(prompt: AssembledPrompt, name: str) -> int:
    return next(x.tokens for x in prompt.layers if x.name == name)


# -- pins --------------------------------------------------------------------------------


def test_a_pin_places_its_definition_at_its_line_only(tmp_path: Path) -> None:
    index, cursor = workspace(tmp_path)
    line = cursor.line + 1
    pins = [f"app/agent.py:{line}=app/store.py:open_store"]
    prompt = engine(index, relatedPins=pins).build(cursor)
    items = related(prompt)
    assert items["open_store"].reason == "pinned" and items["open_store"].score == 1.0
    assert "def open_store(root: str) -> SessionStore:" in prompt.prompt
    elsewhere = dataclasses.replace(cursor, line=cursor.line - 1, column=8)
    assert "open_store" not in related(engine(index, relatedPins=pins).build(elsewhere))
    assert "open_store" not in related(engine(index).build(cursor))  # not there by itself
    index.stop()


def test_pins_read_their_scope_and_definition() -> None:
    pin = parse_pin("a/b.py:12=c/d.py:Name")
    assert pin is not None and (pin.scope, pin.line, pin.path, pin.name) == (
        "a/b.py",
        12,
        "c/d.py",
        "Name",
    )
    assert pin.holds("a/b.py", 11) and not pin.holds("a/b.py", 12)
    assert not pin.holds("x.py", 11)
    whole = parse_pin("a/b.py=Name")
    assert whole is not None and whole.scope == "a/b.py" and whole.line == 0
    assert whole.holds("a/b.py", 99)
    anywhere = parse_pin("Name")
    assert anywhere is not None and anywhere.holds("x.py", 3)
    assert parse_pin("a.py:12=") is None and parse_pin("c/d.py:not a name") is None


# -- (a) the line's names --------------------------------------------------------------------


def test_a_name_the_zone_lacks_brings_its_definition_when_the_line_uses_it(tmp_path: Path) -> None:
    index, cursor = workspace(tmp_path)
    at = typed(cursor, "self._session = SessionStore + ")
    today = related(engine(index).build(at))
    on = engine(index, relatedLineNames=True).build(at)
    items = related(on)
    assert "not in the zone" in items["SessionStore"].reason
    assert items["SessionStore"].score == 1.0
    # the class with its fields and method signatures, which today's layer does not hold
    assert "def list_sessions(self, prefix" in on.prompt
    assert "SessionStore" not in today or "list_sessions" not in today["SessionStore"].text
    index.stop()


def test_a_name_the_line_uses_makes_the_kept_line_build_fresh_once(tmp_path: Path) -> None:
    index, cursor = workspace(tmp_path)
    built = engine(index, relatedLineNames=True)
    memory = PromptMemory()
    first = built.build(cursor, memory=memory)
    memory.remember(first.note)
    assert "def list_sessions" not in first.prompt  # at the line's start: its signature
    typing = typed(cursor, "x = SessionStore ")
    second = built.build(typing, memory=memory)
    assert "def list_sessions" in related(second)["SessionStore"].text  # fresh, in the head
    memory.remember(second.note)
    third = built.build(typed(typing, "or SessionStore"), memory=memory)
    head = second.prompt.split("<|fim_middle|>")[0]
    assert third.prompt.startswith(head)  # asked once: the line's head is kept from then on
    # a function the kept head already holds (its signature) is not worth a fresh build
    assert "describe_tool" in related(first)
    at_start = PromptMemory()
    at_start.remember(first.note)
    known = built.build(typed(cursor, "x = describe_tool "), memory=at_start)
    assert known.prompt.startswith(first.prompt.split("<|fim_middle|>")[0])
    # with the setting off the line keeps its first build's head: the long form never enters
    plain = engine(index)
    kept = PromptMemory()
    kept.remember(plain.build(cursor, memory=kept).note)
    assert "def list_sessions" not in plain.build(typing, memory=kept).prompt
    index.stop()


def test_names_the_zone_binds_are_not_asked_for() -> None:
    zone = "def f(self, args, *, limit=3):\n    total = 0\n    for item in args:\n"
    names = line_names("result = total + item + limit + run_tool(args) + pr", zone, "python")
    assert names == ["result", "run_tool"]
    assert binds("a, b = pair", "b") and binds("x: int = 3", "x")
    assert not binds("x == 3", "x") and not binds("obj.x = 3", "x")
    assert line_names("value = self.store.load", "", "python") == ["value"]


# -- (b) the receiver ----------------------------------------------------------------------


def test_the_receivers_class_is_found_through_an_init_assignment(tmp_path: Path) -> None:
    index, cursor = workspace(tmp_path)
    at = typed(cursor, "self._session.")
    on = engine(index, relatedReceivers=True).build(at)
    items = related(on)
    assert items["SessionStore"].reason.startswith("class of the receiver self._session")
    assert "def append_message(self, session_id: str, message: str" in on.prompt
    assert "def delete_session(self, session_id: str) -> bool" in on.prompt
    today = engine(index).build(at)
    assert "def delete_session(self, session_id: str) -> bool" not in today.prompt
    index.stop()


def test_a_receiver_reached_through_a_factory_or_an_annotation(tmp_path: Path) -> None:
    main = AGENT.replace(
        "self._session = SessionStore(root)", "self._session = open_store(root)"
    ).replace("from app.store import SessionStore", "from app.store import open_store")
    index, cursor = workspace(tmp_path, main)
    prompt = engine(index, relatedReceivers=True).build(typed(cursor, "self._session.ap"))
    assert "class of the receiver" in related(prompt)["SessionStore"].reason
    index.stop()
    assert receiver_chain("x = self._session.ap") == ["self", "_session"]
    assert receiver_chain("client.") == ["client"]
    assert receiver_chain("run(") == [] and receiver_chain("x = 1.") == []
    assert variable_types("def f(client: Optional[Client]):\n", "client") == ["Optional[Client]"]
    assert variable_types("a = Old()\nclient = new Client(url)\n", "client")[0] == "Client"
    assert attribute_types("constructor(private readonly api: ApiClient) {}", "api") == [
        "ApiClient"
    ]
    assert type_heads("Optional[SessionStore] | None") == ["SessionStore", "None"]
    assert type_heads("dict[str, Agent] ") == ["dict"]  # a container, not an Agent
    assert type_heads("weakref.WeakKeyDictionary[Agent, int]") == ["WeakKeyDictionary"]
    assert type_heads("Promise<Client>") == ["Client"] and type_heads('"Store"') == ["Store"]
    init = "def __init__(self, store: Store):\n    self._store = store\n"
    assert attribute_types(init, "_store") == ["Store"]


# -- (c) nothing cross-file when the line needs none ------------------------------------------


def test_nothing_cross_file_when_the_line_needs_none(tmp_path: Path) -> None:
    index, cursor = workspace(tmp_path)
    at = typed(cursor, "total = count + ")
    today = engine(index).build(at)
    assert related(today)  # today the layer anticipates imported names
    on = engine(index, relatedOnDemand=True, relatedLineNames=True, relatedReceivers=True)
    prompt = on.build(at)
    assert related(prompt) == {}
    assert layer_tokens(prompt, "related") == 0 and layer_tokens(prompt, "similar") == 0
    assert "<|file_sep|>" not in prompt.prompt  # plain FIM of the file
    asks = on.build(typed(cursor, "self._session."))
    assert list(related(asks)) == ["SessionStore"]
    index.stop()


def test_the_pieces_are_off_by_default() -> None:
    defaults = ContextSettings()
    assert defaults.related_pins == []
    assert not (
        defaults.related_line_names or defaults.related_receivers or defaults.related_on_demand
    )
