"""Write tiny llama-architecture GGUF files with the ``gguf`` package: the one writer.

Every test that needs an odd vocabulary or odd metadata writes its model here: the
vocabulary is ``<unk> <s> </s>``, the given special tokens (control tokens), the 256
byte tokens and ordinary SPM pieces; the weights are random but complete, so a file
loads vocabulary-only (token counting, format detection) and as a full model
(generation, drafting, KV states).
"""

from __future__ import annotations

import string
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

BASE_TOKENS = ("<unk>", "<s>", "</s>")
FIM_TOKENS = ("<fim_prefix>", "<fim_suffix>", "<fim_middle>")
"""The default special tokens (ids 3, 4, 5), named as the GGUF's FIM ids."""

# llama_token_type as GGUF stores it
_NORMAL, _UNKNOWN, _CONTROL, _BYTE = 1, 2, 3, 6


def default_words(prefix: str = "") -> list[str]:
    """Return 58 ordinary SPM pieces (``▁a``..``▁z``, ``a``..``z`` and six more)."""
    letters = string.ascii_lowercase
    words = [f"▁{prefix}{c}" for c in letters] + [f"{prefix}{c}" for c in letters]
    return [*words, "▁", "▁def", "(", ")", ":", "\n"]


def char_words() -> list[str]:
    """Return one piece per printable ASCII character (plus ``▁``, newline and tab).

    Any ASCII source text tokenizes without byte fallback, one character a token.
    """
    return ["▁", *(chr(c) for c in range(32, 127)), "\n", "\t"]


def write_tiny_gguf(
    path: Path,
    *,
    specials: Sequence[str] = FIM_TOKENS,
    fim: Sequence[str | None] | None = FIM_TOKENS,
    words: Sequence[str] | None = None,
    bos: str = "<s>",
    eos: str = "</s>",
    seed: int = 0,
    n_embd: int = 32,
    n_layers: int = 1,
    n_ff: int = 64,
    quant: str = "F32",
    context_length: int = 4096,
    extra: Mapping[str, int] | None = None,
) -> Path:
    """Write a small llama GGUF with an SPM vocabulary: base, ``specials``, bytes, ``words``.

    ``fim`` names the texts of the prefix, suffix and middle tokens written as the
    GGUF's FIM ids (``None`` for one the model has not, ``fim=None`` for none at all);
    ``words`` defaults to :func:`default_words`. ``quant`` ("F32" or "Q8_0") is the
    type of the matrices; norms stay F32. ``extra`` adds uint32 metadata keys.
    ``context_length`` is the trained context the GGUF claims (the backend clamps
    ``contextLength`` to it): by default the default ``contextLength``.
    """
    import gguf
    from gguf.quants import quantize

    byte_tokens = [f"<0x{b:02X}>" for b in range(256)]
    plain = list(words) if words is not None else default_words()
    tokens = [*BASE_TOKENS, *specials, *byte_tokens, *plain]
    n_vocab = len(tokens)
    n_special = len(BASE_TOKENS) + len(specials)
    n_head = 4
    n_head_kv = 2
    head_dim = n_embd // n_head
    rng = np.random.default_rng(seed)

    def w(*shape: int) -> np.ndarray:
        return (rng.standard_normal(shape) * 0.1).astype(np.float32)

    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_name("tiny")
    writer.add_context_length(context_length)
    writer.add_embedding_length(n_embd)
    writer.add_block_count(n_layers)
    writer.add_feed_forward_length(n_ff)
    writer.add_head_count(n_head)
    writer.add_head_count_kv(n_head_kv)
    writer.add_layer_norm_rms_eps(1e-5)
    writer.add_rope_dimension_count(head_dim)
    qtype = gguf.GGMLQuantizationType[quant]
    writer.add_file_type({"F32": 0, "Q8_0": 7}[quant])
    writer.add_tokenizer_model("llama")
    writer.add_token_list(tokens)
    writer.add_token_scores([-float(i) for i in range(n_vocab)])
    types = [
        _UNKNOWN
        if i == 0
        else _CONTROL
        if i < n_special
        else _BYTE
        if i < n_special + len(byte_tokens)
        else _NORMAL
        for i in range(n_vocab)
    ]
    writer.add_token_types(types)
    writer.add_bos_token_id(tokens.index(bos))
    writer.add_eos_token_id(tokens.index(eos))
    writer.add_unk_token_id(0)
    writer.add_add_bos_token(True)
    if fim is not None:
        for key, text in zip(("fim_pre", "fim_suf", "fim_mid"), fim, strict=True):
            if text is not None:
                writer.add_uint32(f"tokenizer.ggml.{key}_token_id", tokens.index(text))
    for key, value in (extra or {}).items():
        writer.add_uint32(key, value)

    def matrix(name: str, rows: int, cols: int) -> None:
        data = w(rows, cols)
        if qtype == gguf.GGMLQuantizationType.F32:
            writer.add_tensor(name, data)
        else:
            writer.add_tensor(name, quantize(data, qtype), raw_dtype=qtype)

    def norm(name: str) -> None:
        writer.add_tensor(name, np.ones(n_embd, dtype=np.float32))

    matrix("token_embd.weight", n_vocab, n_embd)
    norm("output_norm.weight")
    matrix("output.weight", n_vocab, n_embd)
    for layer in range(n_layers):
        blk = f"blk.{layer}"
        norm(f"{blk}.attn_norm.weight")
        matrix(f"{blk}.attn_q.weight", n_embd, n_embd)
        matrix(f"{blk}.attn_k.weight", n_head_kv * head_dim, n_embd)
        matrix(f"{blk}.attn_v.weight", n_head_kv * head_dim, n_embd)
        matrix(f"{blk}.attn_output.weight", n_embd, n_embd)
        norm(f"{blk}.ffn_norm.weight")
        matrix(f"{blk}.ffn_gate.weight", n_ff, n_embd)
        matrix(f"{blk}.ffn_up.weight", n_ff, n_embd)
        matrix(f"{blk}.ffn_down.weight", n_embd, n_ff)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


@dataclass(frozen=True)
class Family:
    """The special tokens of one model family, as its GGUF files carry them."""

    specials: tuple[str, ...]
    fim: tuple[str | None, str | None, str | None] | None
    """Texts of the tokens the GGUF names as its FIM prefix, suffix and middle ids."""
    bos: str = "<s>"
    eos: str = "</s>"

    def write(self, path: Path, **kwargs: object) -> Path:
        """Write a tiny GGUF of this family whose ordinary pieces are ASCII characters."""
        return write_tiny_gguf(
            path,
            specials=self.specials,
            fim=self.fim,
            words=char_words(),
            bos=self.bos,
            eos=self.eos,
            **kwargs,  # type: ignore[arg-type]
        )


FAMILIES: dict[str, Family] = {
    # Qwen2.5-Coder: FIM plus repository tokens
    "qwen": Family(
        (
            "<|endoftext|>",
            "<|im_start|>",
            "<|im_end|>",
            "<|fim_prefix|>",
            "<|fim_middle|>",
            "<|fim_suffix|>",
            "<|fim_pad|>",
            "<|repo_name|>",
            "<|file_sep|>",
        ),
        ("<|fim_prefix|>", "<|fim_suffix|>", "<|fim_middle|>"),
    ),
    # StarCoder2
    "starcoder": Family(
        (
            "<|endoftext|>",
            "<fim_prefix>",
            "<fim_middle>",
            "<fim_suffix>",
            "<fim_pad>",
            "<repo_name>",
            "<file_sep>",
            "<gh_stars>",
        ),
        ("<fim_prefix>", "<fim_suffix>", "<fim_middle>"),
    ),
    # CodeLlama: the SPM vocabulary spells its FIM tokens with a leading "▁"
    "codellama": Family(("▁<PRE>", "▁<SUF>", "▁<MID>", "▁<EOT>"), ("▁<PRE>", "▁<SUF>", "▁<MID>")),
    # DeepSeek-Coder: full-width bars and "▁"
    "deepseek": Family(
        ("<｜fim▁begin｜>", "<｜fim▁hole｜>", "<｜fim▁end｜>", "<|EOT|>"),
        ("<｜fim▁begin｜>", "<｜fim▁hole｜>", "<｜fim▁end｜>"),
    ),
    # Codestral: suffix first, no middle id in the GGUF
    "codestral": Family(
        ("[INST]", "[/INST]", "[PREFIX]", "[MIDDLE]", "[SUFFIX]"), ("[PREFIX]", "[SUFFIX]", None)
    ),
    # CodeGemma: Qwen's FIM spelling with a file separator and no repository tokens
    "codegemma": Family(
        (
            "<bos>",
            "<eos>",
            "<|fim_prefix|>",
            "<|fim_middle|>",
            "<|fim_suffix|>",
            "<|file_separator|>",
            "<start_of_turn>",
            "<end_of_turn>",
        ),
        ("<|fim_prefix|>", "<|fim_suffix|>", "<|fim_middle|>"),
        bos="<bos>",
        eos="<eos>",
    ),
    # any other model whose GGUF names FIM ids
    "fim": Family(("<pfx>", "<sfx>", "<mdl>"), ("<pfx>", "<sfx>", "<mdl>")),
    # the packaged SmolLM2: repository tokens, no FIM
    "repo": Family(
        (
            "<|endoftext|>",
            "<|im_start|>",
            "<|im_end|>",
            "<repo_name>",
            "<reponame>",
            "<file_sep>",
            "<filename>",
            "<gh_stars>",
        ),
        None,
        bos="<|im_start|>",
        eos="<|im_end|>",
    ),
    # the packaged Gemma-3-270M: turn markers only (comment headers)
    "comment": Family(
        ("<bos>", "<eos>", "<start_of_turn>", "<end_of_turn>"), None, bos="<bos>", eos="<eos>"
    ),
}
"""The families the README says are detected, plus the two packaged models' formats."""
