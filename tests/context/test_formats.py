"""Every prompt format produces the right token sequence (tiny GGUFs, vocabulary-only loads)."""

from __future__ import annotations

from pathlib import Path

import pytest

from lsp_assist.backends.base import ModelInfo
from lsp_assist.context.engine import ContextEngine
from lsp_assist.context.formats import detect_format
from lsp_assist.context.model import Cursor

from .conftest import CART, cart_position
from .fakes import FakeIndex
from .tinygguf import write_tiny_gguf

pytest.importorskip("llama_cpp")

from lsp_assist.context.tokens import VocabTokenizer

FAMILIES: dict[str, tuple[list[str], tuple[str | None, str | None, str | None] | None]] = {
    "qwen": (
        ["<|fim_prefix|>", "<|fim_suffix|>", "<|fim_middle|>", "<|repo_name|>", "<|file_sep|>"],
        ("<|fim_prefix|>", "<|fim_suffix|>", "<|fim_middle|>"),
    ),
    "starcoder": (
        ["<fim_prefix>", "<fim_suffix>", "<fim_middle>", "<repo_name>", "<file_sep>"],
        ("<fim_prefix>", "<fim_suffix>", "<fim_middle>"),
    ),
    "codellama": (["▁<PRE>", "▁<SUF>", "▁<MID>", "▁<EOT>"], ("▁<PRE>", "▁<SUF>", "▁<MID>")),
    "deepseek": (
        ["<｜fim▁begin｜>", "<｜fim▁hole｜>", "<｜fim▁end｜>"],
        ("<｜fim▁begin｜>", "<｜fim▁hole｜>", "<｜fim▁end｜>"),
    ),
    "codestral": (["[PREFIX]", "[SUFFIX]", "[MIDDLE]"], ("[PREFIX]", "[SUFFIX]", None)),
    "codegemma": (
        ["<|fim_prefix|>", "<|fim_suffix|>", "<|fim_middle|>", "<|file_separator|>"],
        ("<|fim_prefix|>", "<|fim_suffix|>", "<|fim_middle|>"),
    ),
    "fim": (["<pfx>", "<sfx>", "<mdl>"], ("<pfx>", "<sfx>", "<mdl>")),
    "repo": (["<repo_name>", "<reponame>", "<file_sep>", "<filename>", "<|im_start|>"], None),
    "comment": ([], None),
}
WANTS_BOS = {"codellama", "deepseek", "codestral", "codegemma", "fim", "comment"}


@pytest.fixture(scope="module")
def tokenizers(tmp_path_factory: pytest.TempPathFactory) -> dict[str, VocabTokenizer]:
    root = tmp_path_factory.mktemp("gguf")
    return {
        name: VocabTokenizer(write_tiny_gguf(root / f"{name}.gguf", specials, fim))
        for name, (specials, fim) in FAMILIES.items()
    }


def _cursor(text: str = CART) -> Cursor:
    line, col = cart_position("result = compute_total(")
    return Cursor(
        path=Path("/ws/shop/cart.py"), language="python", text=text, line=line, column=col
    )


def _find(seq: list[int], token: int) -> int:
    assert seq.count(token) == 1, f"{token} appears {seq.count(token)} times"
    return seq.index(token)


@pytest.mark.parametrize("family", list(FAMILIES))
def test_format_token_sequence(
    family: str, tokenizers: dict[str, VocabTokenizer], shop: FakeIndex
) -> None:
    tok = tokenizers[family]
    info: ModelInfo = tok.info()
    fmt = detect_format(info)
    assert fmt.family == family
    # special-token text inside the code must never become a control token
    text = CART.replace('"""Shopping cart."""', '"""Shopping cart <|fim_middle|> [SUFFIX]."""')
    engine = ContextEngine(shop, tok, info)
    prompt = engine.build(_cursor(text))
    seq = prompt.tokens
    assert prompt.total_tokens <= prompt.budget
    line, col = cart_position("result = compute_total(")
    typed = text.split("\n")[line][:col]
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
    assert detect_format(VocabTokenizer(gemma).info()).name == "comment"
    fmt = detect_format(VocabTokenizer(smol).info())
    assert (fmt.name, fmt.file_sep_token, fmt.repo_name_token) == (
        "repo",
        "<file_sep>",
        "<repo_name>",
    )
    assert fmt.bos_id is None


def test_tokenize_matches_llama_tokenize(tokenizers: dict[str, VocabTokenizer]) -> None:
    # VocabTokenizer calls llama_tokenize with a buffer sized to the text; the ids must be
    # those of Llama.tokenize (which sizes it to the training context)
    texts = [CART, "x", "é😀\t\t  \n\n", "<|fim_prefix|>def f(): <pfx> [PREFIX]", CART * 5]
    for name in ("qwen", "comment", "codellama"):
        tok = tokenizers[name]
        for text in texts:
            for special in (False, True):
                expected = tok.llm.tokenize(text.encode("utf-8"), add_bos=False, special=special)
                assert tok.tokenize(text, special=special) == expected, (name, text[:20])
    assert tokenizers["qwen"].tokenize("") == []
