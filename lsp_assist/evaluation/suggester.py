"""What the acceptance replay drives: an editor's completion client seen from the user's chair.

The replay (``replay/run.py``) plays a simulated user who types a region of real code at a
fixed pace and never waits for an answer. At every key it tells the :class:`Suggester`
what the buffer now is and where the cursor is (:meth:`Suggester.key`); the suggester
does what its editor client would do (cancel what is still out, send the change, ask
for a suggestion, ask again when its server says a better one is ready) and hands every
suggestion it would put on screen to ``on_answer`` as an :class:`Answer`, tagged with the
buffer version it was made for. The replay decides what the user saw: the newest answer
for the current version that arrived before the next key.

Several kinds implement it: lsp-assist's own client over real JSON-RPC
(``replay/client.py``), llama.vim's algorithm against llama.cpp's ``llama-server``
(``peers/llamavim/``), llm.nvim on llm-ls (``peers/llmls.py``) and the oracle ceiling
(``replay/oracle.py``). A client whose rules depend on what the key was (a Tab, a word
key, a typed character) and on whether a suggestion stays on screen after it also
implements :class:`KeyAware`. No pygls here.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, Protocol, runtime_checkable


@dataclass(frozen=True)
class Answer:
    """A suggestion the client would show: its text from the cursor, for one buffer version.

    ``text`` is what appears after the cursor (ghost text) and ``replaces`` how many
    characters right of the cursor on the cursor's line it replaces when accepted
    (0: inserted before them). ``arrived`` is ``time.perf_counter()`` when the client had it.
    """

    version: int
    text: str
    arrived: float
    replaces: int = 0
    request_id: str = ""
    """The server's id of the request that answered it, where the client knows it (joins
    the server's metrics log: its confidence, its tokens)."""


AnswerCallback = Callable[[Answer], None]

KeyKind = Literal["type", "tab", "word"]
"""What a key was: a character (or newline) typed, Tab, or one Ctrl+Right word."""


class Suggester(Protocol):
    """An editor's inline-completion client as the replay drives it (one workspace, one user)."""

    label: str
    """The row's name in the table."""

    async def start(self, workspace: Path) -> None:
        """Start the server (or connect) for ``workspace``; return when suggestions can come."""

    async def open(self, path: Path, text: str, version: int) -> None:
        """The user opened ``path`` with ``text`` (the region already removed)."""

    async def rest(self, path: Path, line: int, column: int, seconds: float) -> None:
        """The cursor comes to rest at (line, column) for ``seconds`` before the first key
        (lsp-assist's clients report it; llama.vim does what it does on CursorHold)."""

    def key(
        self,
        path: Path,
        text: str,
        line: int,
        column: int,
        version: int,
        on_answer: AnswerCallback,
    ) -> None:
        """A key changed the buffer to ``text`` (``version``), cursor at (line, column).

        Returns at once; the suggester works in the background and calls ``on_answer``
        (on the event loop) for every suggestion it would show for this version. An
        accepted suggestion comes here too, as the key that inserted it.
        """

    async def close_file(self, path: Path, text: str) -> None:
        """The user is done with ``path`` (its original ``text`` is restored)."""

    async def stop(self) -> None:
        """Stop the server; the row is over."""


@runtime_checkable
class KeyAware(Protocol):
    """A client that is told what each key was before :meth:`Suggester.key` hears of it."""

    def key_kind(self, kind: KeyKind, ghost_left: bool) -> None:
        """The next key is ``kind``; ``ghost_left``: a suggestion stays on screen after it
        (typed through, or the rest of a word-by-word acceptance)."""
