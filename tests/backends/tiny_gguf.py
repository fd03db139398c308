"""Write tiny llama-architecture GGUF files with the ``gguf`` package (for odd vocabularies)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

BASE_TOKENS = ["<unk>", "<s>", "</s>", "<fim_prefix>", "<fim_suffix>", "<fim_middle>"]
CONTROL = {1, 2, 3, 4, 5}


def default_words(prefix: str = "") -> list[str]:
    """Return 58 ordinary SPM pieces."""
    letters = "abcdefghijklmnopqrstuvwxyz"
    words = [f"▁{prefix}{c}" for c in letters] + [f"{prefix}{c}" for c in letters]
    return words + ["▁", "▁def", "(", ")", ":", "\n"][: 64 - len(BASE_TOKENS) - len(words)]


def write_tiny_gguf(
    path: Path,
    *,
    words: Sequence[str] | None = None,
    fim: bool = True,
    seed: int = 0,
    n_embd: int = 32,
    n_layers: int = 1,
    n_ff: int = 64,
    quant: str = "F32",
    extra: dict[str, int] | None = None,
) -> Path:
    """Write a small llama GGUF; SPM vocabulary: BASE_TOKENS, 256 byte tokens, ``words``.

    ``quant`` ("F32" or "Q8_0") is the type of the matrices; norms stay F32.
    """
    import gguf
    from gguf.quants import quantize

    byte_tokens = [f"<0x{b:02X}>" for b in range(256)]
    tokens = [*BASE_TOKENS, *byte_tokens, *(words if words is not None else default_words())]
    n_vocab = len(tokens)
    n_head = 4
    n_head_kv = 2
    head_dim = n_embd // n_head
    rng = np.random.default_rng(seed)

    def w(*shape: int) -> np.ndarray:
        return (rng.standard_normal(shape) * 0.1).astype(np.float32)

    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_name("tiny")
    writer.add_context_length(512)
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
        3 if i in CONTROL else 2 if i == 0 else 6 if tokens[i].startswith("<0x") else 1
        for i in range(n_vocab)
    ]
    writer.add_token_types(types)
    writer.add_bos_token_id(1)
    writer.add_eos_token_id(2)
    writer.add_unk_token_id(0)
    writer.add_add_bos_token(True)
    if fim:
        writer.add_uint32("tokenizer.ggml.fim_pre_token_id", 3)
        writer.add_uint32("tokenizer.ggml.fim_suf_token_id", 4)
        writer.add_uint32("tokenizer.ggml.fim_mid_token_id", 5)
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
