"""Every prompt format produces the right token sequence (tiny GGUFs, vocabulary-only loads)."""

from __future__ import annotations

import ast
from dataclasses import replace
from pathlib import Path

import pytest

from lsp_assist.backends.base import ModelInfo
from lsp_assist.backends.vocab import SPECIAL_TOKEN_NAMES, Vocabulary
from lsp_assist.context.engine import ContextEngine
from lsp_assist.context.formats import FORMAT_TOKEN_TEXTS, detect_format
from lsp_assist.context.layout import heal_split
from lsp_assist.context.model import Cursor
from lsp_assist.index.workspace import WorkspaceIndex
from tests.support.tiny_gguf import FAMILIES

from .conftest import CART, cart_position, shop_path

pytest.importorskip("llama_cpp")

WANTS_BOS = {"codellama", "deepseek", "codestral", "codegemma", "fim", "comment"}


@pytest.fixture(scope="module")
def tokenizers(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Vocabulary]:
    root = tmp_path_factory.mktemp("gguf")
    return {
        name: Vocabulary(family.write(root / f"{name}.gguf")) for name, family in FAMILIES.items()
    }


def test_the_vocabulary_reader_reports_every_token_detection_uses() -> None:
    # one table: a text detect_format looks for but the reader never reports would make
    # every model of that family fall back to another format
    assert FORMAT_TOKEN_TEXTS - set(SPECIAL_TOKEN_NAMES) == set()
    assert {"[PREFIX]", "<｜fim▁begin｜>", "▁<PRE>", "<|file_separator|>"} <= FORMAT_TOKEN_TEXTS


def test_context_never_imports_llama_cpp() -> None:
    # the model is read in backends/vocab.py only; context gets a tokenizer and ModelInfo
    package = Path(__file__).resolve().parents[2] / "lsp_assist" / "context"
    for source in sorted(package.glob("*.py")):
        for node in ast.walk(ast.parse(source.read_text(), str(source))):
            names = (
                [alias.name for alias in node.names]
                if isinstance(node, ast.Import)
                else [node.module or ""]
                if isinstance(node, ast.ImportFrom)
                else []
            )
            assert not [n for n in names if n.split(".")[0] == "llama_cpp"], source.name


def _cursor(index: WorkspaceIndex, text: str = CART) -> Cursor:
    line, col = cart_position("result = compute_total(")
    return Cursor(path=shop_path(index), language="python", text=text, line=line, column=col)


def _find(seq: list[int], token: int) -> int:
    assert seq.count(token) == 1, f"{token} appears {seq.count(token)} times"
    return seq.index(token)


@pytest.mark.parametrize("family", list(FAMILIES))
def test_format_token_sequence(
    family: str, tokenizers: dict[str, Vocabulary], shop: WorkspaceIndex
) -> None:
    tok = tokenizers[family]
    info: ModelInfo = tok.info()
    fmt = detect_format(info)
    assert fmt.family == family
    # special-token text inside the code must never become a control token
    text = CART.replace('"""Shopping cart."""', '"""Shopping cart <|fim_middle|> [SUFFIX]."""')
    engine = ContextEngine(shop, tok, info)
    prompt = engine.build(_cursor(shop, text))
    seq = prompt.tokens
    assert prompt.total_tokens <= prompt.budget
    line, col = cart_position("result = compute_total(")
    typed_text = text.split("\n")[line][:col]
    if fmt.is_fim:  # the indentation ends the prefix; the middle starts at the code
        typed_text = typed_text.lstrip(" \t")
    typed, healed = heal_split(typed_text)
    assert healed == "(" and prompt.healed == healed  # token healing: the model writes it
    typed_ids = tok.tokenize(typed)
    assert seq[-len(typed_ids) :] == typed_ids
    assert prompt.stable_prefix_len == len(seq) - len(typed_ids)
    assert (seq[0] == info.bos_id) == (family in WANTS_BOS)
    if fmt.is_fim:
        pre = _find(seq, fmt.fim_prefix_id)  # type: ignore[arg-type]
        suf = _find(seq, fmt.fim_suffix_id)  # type: ignore[arg-type]
        after = tok.tokenize(prompt.suffix.split("\n", 3)[0])
        if family == "codestral":
            assert suf == (1 if info.bos_id is not None else 0) and pre > suf
            assert seq[suf + 1 : suf + 1 + len(after)] == after
        else:
            mid = _find(seq, fmt.fim_middle_id)  # type: ignore[arg-type]
            assert pre < suf < mid
            assert seq[mid + 1 :] == typed_ids
            assert seq[suf + 1 : suf + 1 + len(after)] == after
    if fmt.file_sep_token:
        sep = info.special_tokens[fmt.file_sep_token]
        assert seq.count(sep) >= 2  # a related file and the current file
        if fmt.repo_name_token:
            assert (
                seq[0 if family not in WANTS_BOS else 1] == info.special_tokens[fmt.repo_name_token]
            )
        if fmt.is_fim:
            assert max(i for i, t in enumerate(seq) if t == sep) < seq.index(fmt.fim_prefix_id)  # type: ignore[arg-type]
    assert "def compute_total(items, discount=0.0):" in prompt.prompt


def test_real_vocabularies_detect_formats() -> None:
    from lsp_assist.backends.models import embedded_model_path, small_model_path
    from lsp_assist.errors import ModelLoadError

    try:
        gemma, smol = embedded_model_path(), small_model_path()
    except ModelLoadError as exc:
        pytest.skip(str(exc))
    assert detect_format(Vocabulary(gemma).info()).name == "comment"
    fmt = detect_format(Vocabulary(smol).info())
    assert (fmt.name, fmt.file_sep_token, fmt.repo_name_token) == (
        "repo",
        "<file_sep>",
        "<repo_name>",
    )
    assert fmt.bos_id is None


def test_tokenize_matches_llama_tokenize(tokenizers: dict[str, Vocabulary]) -> None:
    # Vocabulary calls llama_tokenize with a buffer sized to the text; the ids must be
    # those of Llama.tokenize (which sizes it to the training context)
    import llama_cpp

    texts = [CART, "x", "é😀\t\t  \n\n", "<|fim_prefix|>def f(): <pfx> [PREFIX]", CART * 5]
    for name in ("qwen", "comment", "codellama"):
        tok = tokenizers[name]
        llm = llama_cpp.Llama(model_path=str(tok.path), vocab_only=True, verbose=False)
        for text in texts:
            for special in (False, True):
                expected = llm.tokenize(text.encode("utf-8"), add_bos=False, special=special)
                assert tok.tokenize(text, special=special) == expected, (name, text[:20])
    assert tokenizers["qwen"].tokenize("") == []


@pytest.mark.parametrize("family", ["qwen", "starcoder"])
def test_a_file_with_no_other_file_to_show_is_a_plain_fim_prompt(
    family: str, tokenizers: dict[str, Vocabulary], tmp_path: Path
) -> None:
    """No related or similar file: no repository header, no path line, just FIM."""
    from tests.support.workspace import scanned_index

    tok = tokenizers[family]
    info = tok.info()
    fmt = detect_format(info)
    text = "def add(a, b):\n    return a + b\n\n\nprint(add(1, 2))\n"
    index = scanned_index(tmp_path / "ws", {"lone.py": text})
    try:
        engine = ContextEngine(index, tok, info)
        cursor = Cursor(
            path=index.roots[0] / "lone.py", language="python", text=text, line=1, column=4
        )
        prompt = engine.build(cursor)
        baseline = engine.build(cursor, strategy="baseline")
    finally:
        index.stop()
    for built in (prompt, baseline):
        assert built.tokens[0] == fmt.fim_prefix_id, built.prompt
        for name in (fmt.repo_name_token, fmt.file_sep_token):
            assert name and info.special_tokens[name] not in built.tokens, built.prompt
        assert "lone.py" not in built.prompt
        assert built.prompt.startswith(f"{fmt.text_of(fmt.fim_prefix_id)}def add(a, b):\n    ")


@pytest.mark.parametrize("family", ["qwen", "starcoder", "repo", "codellama"])
def test_the_project_summary_only_where_the_format_has_a_place_for_it(
    family: str, tokenizers: dict[str, Vocabulary], shop: WorkspaceIndex
) -> None:
    """FIM with repository tokens: file blocks only (its trained layout); others: the summary."""
    tok = tokenizers[family]
    info = tok.info()
    fmt = detect_format(info)
    cursor = replace(_cursor(shop), open_files=(shop_path(shop, "shop/billing_old.py"),))
    prompt = ContextEngine(shop, tok, info).build(cursor, budget=4096)  # tiny vocabularies
    (layer,) = [x for x in prompt.layers if x.name == "project_summary"]
    assert fmt.carries_project_summary == (family in ("repo", "codellama"))
    assert (layer.tokens > 0) == fmt.carries_project_summary, layer
    assert "def compute_total(items, discount=0.0):" in prompt.prompt  # related still there
