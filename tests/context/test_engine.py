"""The layered context engine on a small Python workspace: layers, budget, determinism, secrets.

The workspace is on disk and indexed by the real ``WorkspaceIndex`` (the ``shop`` fixture).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lsp_assist.context.engine import ContextEngine, explain
from lsp_assist.context.model import AssembledPrompt, Cursor
from lsp_assist.context.retrieval import Retriever
from lsp_assist.context.tokens import ApproxTokenizer
from lsp_assist.errors import ContextError
from lsp_assist.index.workspace import WorkspaceIndex
from tests.support.workspace import rewrite, scanned_index

from .conftest import CART, FILES, cart_position, cursor_at, engine_for, shop_path
from .fakes import CODELLAMA_LIKE, CODESTRAL_LIKE, GEMMA_LIKE, QWEN_LIKE, SMOLLM_LIKE

MODELS = [GEMMA_LIKE, SMOLLM_LIKE, QWEN_LIKE, CODESTRAL_LIKE, CODELLAMA_LIKE]


@pytest.mark.parametrize("model", MODELS, ids=lambda m: m.path)
def test_called_definition_is_in_prompt_and_lookalike_is_not(shop: WorkspaceIndex, model) -> None:
    prompt = engine_for(shop, model).build(cursor_at(shop, "result = compute_total("))
    related = {layer.name: layer for layer in prompt.layers}["related"]
    assert [i.symbol for i in related.items if i.symbol == "compute_total"]
    assert all(i.source == "shop/billing.py" for i in related.items)
    assert "subtotal = sum(item.price" in prompt.prompt
    assert "legacy total" not in prompt.prompt
    assert "billing_old" not in prompt.prompt


def test_layers_in_prompt_order(shop: WorkspaceIndex) -> None:
    prompt = engine_for(shop).build(cursor_at(shop, "result = compute_total("))
    names = [layer.name for layer in prompt.layers]
    assert names == [
        "instructions",
        "project_summary",
        "related",
        "similar",
        "file_summary",
        "editing_zone",
    ]
    assert sum(layer.tokens for layer in prompt.layers) == prompt.total_tokens
    # the typed line is last, its final "(" left for the model to write (token healing)
    assert prompt.prompt.endswith("        result = compute_total")
    assert prompt.healed == "("
    text = explain(prompt)
    assert "== related" in text and "compute_total" in text


def test_secret_file_never_reaches_prompt(shop: WorkspaceIndex) -> None:
    secrets = shop_path(shop, "shop/secrets.py")
    for strategy in ("layered", "baseline"):
        eng = engine_for(shop)
        eng.note_opened(secrets)
        prompt = eng.build(
            cursor_at(shop, "creds = load_credentials(", open_files=(secrets,)),
            strategy=strategy,
        )
        assert "sk-very-secret" not in prompt.prompt
        assert "hunter2" not in prompt.prompt
        assert "shop/secrets.py" not in prompt.prompt
    with pytest.raises(ContextError):
        engine_for(shop).build(
            Cursor(path=secrets, language="python", text=FILES["shop/secrets.py"], line=0, column=0)
        )


def test_determinism_same_state_same_bytes(shop: WorkspaceIndex) -> None:
    cur = cursor_at(shop, "cart.add(")
    a = engine_for(shop, QWEN_LIKE).build(cur)
    engine = engine_for(shop, QWEN_LIKE)
    engine.build(cursor_at(shop, "self.items = []"))
    b = engine.build(cur)
    assert a.prompt == b.prompt
    assert a.tokens == b.tokens
    assert a.to_json()["layers"] == b.to_json()["layers"]


@pytest.mark.parametrize("model", MODELS, ids=lambda m: m.path)
def test_typing_within_a_line_changes_only_the_tail(shop: WorkspaceIndex, model) -> None:
    engine = engine_for(shop, model)
    line, _col = cart_position("        return result")
    typed = "return self.items[0].price * 2 + compute_total(self.items)"
    base = CART.split("\n")
    prev = None
    for k in range(len(typed) + 1):
        lines = list(base)
        lines[line] = "        " + typed[:k]
        text = "\n".join(lines)
        prompt = engine.build(
            Cursor(path=shop_path(shop), language="python", text=text, line=line, column=8 + k)
        )
        if prev is not None:
            stable = prev.tokens[: prev.stable_prefix_len]
            if "compute_total(" not in typed[: k - 1] and "compute_total(" in typed[:k]:
                prev = prompt
                continue  # a completed call may add its definition once
            assert prompt.tokens[: len(stable)] == stable
        prev = prompt


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    offset=st.integers(min_value=0, max_value=len(CART)),
    budget=st.integers(min_value=40, max_value=700),
    model=st.sampled_from(MODELS),
    strategy=st.sampled_from(["layered", "baseline"]),
)
def test_budget_never_exceeded(
    shop: WorkspaceIndex, offset: int, budget: int, model, strategy: str
) -> None:
    line = CART.count("\n", 0, offset)
    col = offset - (CART.rfind("\n", 0, offset) + 1)
    cur = Cursor(
        path=shop_path(shop),
        language="python",
        text=CART,
        line=line,
        column=col,
        open_files=(shop_path(shop, "shop/billing.py"), shop_path(shop, "shop/billing_old.py")),
    )
    prompt = engine_for(shop, model).build(cur, budget=budget, strategy=strategy)
    assert prompt.total_tokens <= budget
    assert 0 <= prompt.stable_prefix_len <= prompt.total_tokens


def test_layers_can_be_switched_off(shop: WorkspaceIndex) -> None:
    engine = engine_for(
        shop,
        layer_related=False,
        layer_similar=False,
        layer_file_summary=False,
        layer_project_summary=False,
    )
    prompt = engine.build(cursor_at(shop, "result = compute_total("))
    tokens = prompt.layer_tokens()
    assert tokens["related"] == tokens["similar"] == 0
    assert tokens["file_summary"] == tokens["project_summary"] == 0
    assert "subtotal" not in prompt.prompt


def test_threshold_drops_weak_candidates(shop: WorkspaceIndex) -> None:
    text = CART.replace(
        "    def remove(self, name):\n", "    def remove(self, name):\n        compute_totals([])\n"
    )
    line, col = cart_position("print(cart.total(")
    cur = Cursor(path=shop_path(shop), language="python", text=text, line=line + 1, column=col)
    weak = {
        i.symbol: i.score
        for layer in engine_for(shop, related_threshold=0.2).build(cur).layers
        for i in layer.items
        if layer.name == "related"
    }
    assert "compute_totals" in weak
    # the imported name outranks the look-alike found by name only, and a threshold
    # between the two keeps one and drops the other
    assert weak["compute_total"] > weak["compute_totals"]
    between = (weak["compute_total"] + weak["compute_totals"]) / 2
    strict = engine_for(shop, related_threshold=between).build(cur)
    names = [i.symbol for layer in strict.layers for i in layer.items if layer.name == "related"]
    assert "compute_totals" not in names
    assert "compute_total" in names


def test_editing_zone_is_whole_blocks(shop: WorkspaceIndex) -> None:
    engine = engine_for(shop, QWEN_LIKE, editing_zone_lines=12)
    prompt = engine.build(cursor_at(shop, "self.items.append("))
    zone = {layer.name: layer for layer in prompt.layers}["editing_zone"]
    first = zone.text.lstrip("\n").split("\n", 1)[0]
    assert first.strip().startswith(("def ", "class ", "@", '"""')), first
    assert "def add(self, item):" in zone.text


def test_file_summary_elides_bodies_outside_zone(shop: WorkspaceIndex) -> None:
    engine = engine_for(shop, editing_zone_lines=8)
    prompt = engine.build(cursor_at(shop, "print(cart.total("))
    summary = {layer.name: layer for layer in prompt.layers}["file_summary"]
    assert "def remove(self, name): ..." in summary.text
    assert "self.items = [i for i" not in summary.text


def test_baseline_stuffs_whole_file_and_open_files(shop: WorkspaceIndex) -> None:
    billing = shop_path(shop, "shop/billing.py")
    prompt = engine_for(shop).build(
        cursor_at(shop, "result = compute_total(", open_files=(billing,)), strategy="baseline"
    )
    assert prompt.strategy == "baseline"
    assert "class Invoice:" in prompt.prompt
    assert "class Item:" in prompt.prompt
    layered = engine_for(shop).build(
        cursor_at(shop, "result = compute_total(", open_files=(billing,))
    )
    assert layered.total_tokens < prompt.total_tokens


def test_recent_files_feed_similar_code(shop: WorkspaceIndex) -> None:
    other = """def process_order(cart):
    for item in cart.items:
        if item.price > MAX_ITEMS:
            raise ValueError("cart is full")
        cart.items.append(item)
"""
    checkout = rewrite(shop, "shop/checkout.py", other)
    engine = engine_for(shop, similar_threshold=0.1)
    engine.note_opened(checkout)
    prompt = engine.build(cursor_at(shop, "self.items.append("))
    similar = {layer.name: layer for layer in prompt.layers}["similar"]
    assert [i.source for i in similar.items] == ["shop/checkout.py"]
    # rolling memory: only the last M files are kept
    engine.update_settings(dataclasses.replace(engine.settings, recent_files=2))
    root = shop.roots[0]
    for name in ("a.py", "b.py", "c.py"):
        engine.note_opened(root / name)
    assert engine.recent_files() == [root / "c.py", root / "b.py"]


def test_retriever_text_follows_the_index_entry(shop: WorkspaceIndex) -> None:
    class Counting(WorkspaceIndex):
        reads = 0

        def text_of(self, path: Path) -> str | None:
            Counting.reads += 1
            return super().text_of(path)

    index = scanned_index(shop.roots[0], index_class=Counting)
    retriever = Retriever(index, index.relative)
    rel = "shop/billing.py"
    path = shop_path(index, rel)
    first = retriever.text_of(path)
    assert first == index.text_of(path)
    reads = Counting.reads
    assert retriever.text_of(path) is first  # same entry: no new read
    assert Counting.reads == reads
    rewrite(index, rel, "def changed():\n    pass\n")  # a new text gives a new entry
    assert retriever.text_of(path) == "def changed():\n    pass\n"
    retriever.reset(force=True)
    assert retriever.text_of(path) == "def changed():\n    pass\n"


def lone_function_prompt(tmp_path: Path, examples: int) -> AssembledPrompt:
    """Return the 512-token prompt at the body of a lone file's function whose docstring
    holds ``examples`` lines."""
    doc = "\n".join(
        f"    Example {i}: transform({i}) == {i * i}, squared." for i in range(examples)
    )
    body = "    y = x * x\n    \n    return y\n"
    source = f'def transform(x):\n    """Square x.\n\n{doc}\n    """\n{body}'
    path = tmp_path / "lone.py"
    path.write_text(source)
    index = scanned_index(tmp_path)
    engine = ContextEngine(index, ApproxTokenizer(QWEN_LIKE.special_tokens), QWEN_LIKE)
    lines = source.split("\n")
    line = lines.index("    y = x * x") + 1
    prompt = engine.build(
        Cursor(path=path, language="python", text=source, line=line, column=4), budget=512
    )
    return prompt


def test_the_zone_takes_what_related_and_similar_leave(tmp_path: Path) -> None:
    """A lone file with nothing to retrieve: the zone grows past its own share (40 % of
    the budget) into the related share, up to its group cap, and the prompt keeps the
    function's docstring, whole, that the share alone would have left out."""
    prompt = lone_function_prompt(tmp_path, 12)
    layers = {layer.name: layer for layer in prompt.layers}
    share = 512 - 512 // 10  # the fresh build's plan (less the zone's growth room)
    own = share - int(share * 0.1) - int(share * 0.3) - int(share * 0.2)
    assert layers["related"].tokens == layers["similar"].tokens == 0
    assert layers["editing_zone"].tokens > own + 64, layers["editing_zone"].tokens
    assert '"""Square x.' in layers["editing_zone"].text
    assert "Example 11:" in layers["editing_zone"].text
    assert prompt.total_tokens <= 512


def test_a_small_file_past_the_zones_group_cap_is_shown_whole(tmp_path: Path) -> None:
    """The zone's group cap (twice its share) is lifted for what every layer left: a
    lone function of ~450 tokens under a 512-token budget is shown whole, in the room a
    fresh build otherwise keeps for typing, instead of its last lines (HumanEval/105's
    shape)."""
    prompt = lone_function_prompt(tmp_path, 18)
    layers = {layer.name: layer for layer in prompt.layers}
    share = 512 - 512 // 10
    own = share - int(share * 0.1) - int(share * 0.3) - int(share * 0.2)
    assert layers["editing_zone"].tokens > 2 * own, layers["editing_zone"].tokens
    assert layers["editing_zone"].text.startswith("def transform(x):\n")
    assert layers["file_summary"].tokens == 0  # nothing left to outline
    assert prompt.total_tokens <= 512  # 18 examples fit only with the typing room


def test_the_zone_grown_into_the_leftover_leaves_the_outline(tmp_path: Path) -> None:
    """The zone grows past its cap into the outline's tokens only to take the whole file:
    the outline is never emptied while functions lie outside the zone, and where the
    budget holds the file each function is named."""
    funcs = [
        f"def step_{i}(value):\n    total = value + {i}\n    total *= {i + 1}\n    return total\n"
        for i in range(14)
    ]
    source = "\n\n".join(funcs)
    path = tmp_path / "steps.py"
    path.write_text(source)
    index = scanned_index(tmp_path)
    engine = ContextEngine(index, ApproxTokenizer(QWEN_LIKE.special_tokens), QWEN_LIKE)
    line = source.split("\n").index("    total = value + 7")
    cursor = Cursor(path=path, language="python", text=source, line=line, column=4)
    for budget in (256, 384, 448, 512, 640, 768):
        prompt = engine.build(cursor, budget=budget)
        layers = {layer.name: layer for layer in prompt.layers}
        assert prompt.total_tokens <= budget
        outside = [i for i in range(14) if f"def step_{i}(" not in layers["editing_zone"].text]
        if outside:
            assert layers["file_summary"].tokens > 0, (budget, outside)
        if budget >= 640:
            assert all(f"def step_{i}(value)" in prompt.prompt for i in range(14)), budget


def test_a_docstring_too_long_for_the_zone_is_left_whole_to_the_outline(tmp_path: Path) -> None:
    """A docstring longer than the zone may grow is not cut: the zone starts after it
    (a zone starting inside it shows closing quotes a model reads as opening ones)."""
    prompt = lone_function_prompt(tmp_path, 40)
    zone = next(layer for layer in prompt.layers if layer.name == "editing_zone")
    assert "Example" not in zone.text and '"""' not in zone.text
    assert zone.text.startswith("    y = x * x\n")
    assert "def transform(x)" in prompt.prompt  # the outline names the function
