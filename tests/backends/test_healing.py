"""Token healing: the agreeing tokens of a vocabulary, the forced text, the typed split."""

from __future__ import annotations

from collections import OrderedDict

import numpy as np
import pytest

from lsp_assist.backends.healing import ForcedPrefix, PieceIndex
from lsp_assist.context.layout import heal_split

PIECES = [b"", b"   ", b"    ", b" out", b" return", b"out", b" ", b"  ", b"x", b"(", b'("']


def _index() -> PieceIndex:
    # token 0 is a control token (empty piece), like BOS/EOS
    return PieceIndex(len(PIECES), lambda t: PIECES[t], lambda t: t != 0)


def _ids(found: object) -> set[int]:
    return {int(t) for t in np.asarray(found).tolist()}


def test_compatible_tokens_are_prefixes_of_the_forced_text_or_extend_it() -> None:
    index = _index()
    assert _ids(index.compatible(b"    ")) == {1, 2, 6, 7}  # '   ', '    ', ' ', '  '
    # more spaces than typed are never offered: the model took them and wrote only spaces
    assert _ids(index.compatible(b" ")) == {3, 4, 6}
    assert _ids(index.compatible(b"(")) == {9, 10}
    assert _ids(index.compatible(b"z")) == set()


def test_forced_prefix_picks_the_likeliest_agreeing_token_and_returns_the_excess() -> None:
    forced = ForcedPrefix("    ", _index())
    logits = np.zeros(len(PIECES), dtype=np.float32)
    logits[[5, 8]] = 9.0  # 'out' and 'x' are likelier but disagree with the spaces
    logits[1] = 3.0  # '   '
    logits[2] = 1.0  # '    ' (the prompt's own token: rarely chosen by the model)
    assert forced.choose(logits) == 1
    assert forced.consume(PIECES[1]) == b""
    assert forced.active and forced.remaining == b" "
    logits[3] = 5.0  # ' out' now agrees (it starts with the last space)
    assert forced.choose(logits) == 3
    assert forced.consume(PIECES[3]) == b"out"
    assert not forced.active
    assert forced.consume(b"x") == b"x"


@pytest.mark.parametrize(
    ("typed", "kept", "healed"),
    [
        ("    ", "   ", " "),
        ("        x = 1\n    ", "        x = 1\n   ", " "),
        ("    ret", "   ", " ret"),
        ("    x = ", "    x =", " "),
        ("    print(", "    print", "("),
        ("    foo.bar", "    foo", ".bar"),
        ("    foo_bar", "    foo", "_bar"),
        ("    x = 12", "    x = ", "12"),
        ("", "", ""),
        ("\t\tif", "\t", "\tif"),
    ],
)
def test_heal_split_cuts_the_last_pre_token(typed: str, kept: str, healed: str) -> None:
    assert heal_split(typed) == (kept, healed)
    assert kept + healed == typed


@pytest.mark.slow
def test_a_forced_prefix_is_written_by_the_model_and_left_out_of_the_text(smol: object) -> None:
    from lsp_assist.backends.base import GenerationRequest
    from lsp_assist.backends.llama import LocalBackend

    assert isinstance(smol, LocalBackend) and smol.heals_tokens
    prompt = "def add(a, b):\n    return a + b\n\n\ndef sub(a, b):\n"
    ids = smol.tokenize(prompt)
    plain = smol.generate(GenerationRequest(prompt_tokens=ids, max_tokens=8, draft=False))
    healed = smol.generate(
        GenerationRequest(prompt_tokens=ids, max_tokens=8, draft=False, forced_prefix="    ret")
    )
    written = b"".join(smol._engine.piece(t, special=True) for t in healed.tokens)
    assert written.startswith(b"    ret"), written
    assert healed.text == written.decode()[len("    ret") :]
    assert not healed.text.startswith(("ret", " ")), healed.text
    assert plain.text != healed.text  # the constraint steered the generation


def test_the_runners_up_are_the_best_of_the_agreeing_tokens() -> None:
    forced = ForcedPrefix(" ", _index())
    logits = np.zeros(len(PIECES), dtype=np.float32)
    logits[[5, 8, 9]] = 9.0  # likelier, but none of them starts with the space
    logits[4], logits[3], logits[6] = 3.0, 2.0, 1.0  # ' return', ' out', ' '
    assert forced.best(logits, 2) == [4, 3]
    assert forced.best(logits, 10) == [4, 3, 6]


def test_the_session_builds_the_healing_index_at_load(
    smol_path: object, tmp_path: object, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Built on first use, the index cost the first healed keystroke ~1 s (``make demo``'s
    ``print(`` with Qwen2.5-Coder-0.5B); the load builds it now, so a request finds it."""
    from pathlib import Path

    from lsp_assist.backends import healing
    from lsp_assist.config import parse_settings
    from lsp_assist.serving.session import Session

    assert isinstance(smol_path, Path) and isinstance(tmp_path, Path)
    settings, _ = parse_settings(
        {"modelPath": str(smol_path), "contextBudget": 256, "metrics": False, "watch": False}
    )
    monkeypatch.setattr(healing, "_INDEXES", OrderedDict())  # none built yet in this process
    session = Session(settings, workspace=tmp_path)
    try:
        backend = session.load_backend()
        assert backend is not None
        key = f"{smol_path}:{backend._engine.n_vocab}"  # type: ignore[attr-defined]
        assert key in healing._INDEXES
    finally:
        session.close()
