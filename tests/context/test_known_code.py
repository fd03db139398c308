"""Other files' blocks from the standard library are left out unless asked (known_code.py)."""

from __future__ import annotations

import shutil
from pathlib import Path

from lsp_assist.context.known_code import KnownCode, stdlib_root
from lsp_assist.index.workspace import WorkspaceIndex

from .conftest import BILLING, cursor_at, engine_for, shop_path


def test_the_stdlib_and_its_copies_are_known_and_other_files_are_not(tmp_path: Path) -> None:
    known = KnownCode()
    decoder = stdlib_root() / "json" / "decoder.py"
    assert known.is_stdlib(decoder)
    copy = tmp_path / "ws" / "json" / "decoder.py"
    copy.parent.mkdir(parents=True)
    shutil.copyfile(decoder, copy)
    assert known.is_stdlib(copy)
    copy.write_text(copy.read_text() + "\n# changed\n")  # no longer the stdlib's text
    assert not known.is_stdlib(copy)
    own = tmp_path / "ws" / "decoder.py"  # the same name, the user's own text
    own.write_text("def decode(text):\n    return text\n")
    assert not known.is_stdlib(own)
    assert not known.is_stdlib(tmp_path / "missing.py")


def test_a_definition_in_a_stdlib_copy_is_quoted_only_when_asked(
    shop: WorkspaceIndex, tmp_path: Path
) -> None:
    # a stand-in standard library holding shop/billing.py byte for byte
    root = tmp_path / "stdlib"
    (root / "shop").mkdir(parents=True)
    (root / "shop" / "billing.py").write_text(BILLING)
    assert shop_path(shop, "shop/billing.py").read_text() == BILLING

    def related(prompt_engine) -> list[str]:  # type: ignore[no-untyped-def]
        prompt_engine.known = KnownCode(root)
        prompt = prompt_engine.build(cursor_at(shop, "result = compute_total("))
        layer = {layer.name: layer for layer in prompt.layers}["related"]
        return [item.symbol for item in layer.items]

    assert "compute_total" not in related(engine_for(shop))
    assert "compute_total" in related(engine_for(shop, layer_standard_library=True))
    # the real standard library does not hold the shop: quoted by default
    assert "compute_total" in [
        item.symbol
        for layer in engine_for(shop).build(cursor_at(shop, "result = compute_total(")).layers
        if layer.name == "related"
        for item in layer.items
    ]
