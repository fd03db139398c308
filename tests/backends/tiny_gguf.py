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
    extra: dict[str, int] | None = None,
) -> Path:
    """Write a one-layer llama GGUF; SPM vocabulary: BASE_TOKENS, 256 byte tokens, ``words``."""
    import gguf

    byte_tokens = [f"<0x{b:02X}>" for b in range(256)]
    tokens = [*BASE_TOKENS, *byte_tokens, *(words if words is not None else default_words())]
    n_vocab = len(tokens)
    n_ff = 64
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
    writer.add_block_count(1)
    writer.add_feed_forward_length(n_ff)
    writer.add_head_count(n_head)
    writer.add_head_count_kv(n_head_kv)
    writer.add_layer_norm_rms_eps(1e-5)
    writer.add_rope_dimension_count(head_dim)
    writer.add_file_type(0)
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
    writer.add_tensor("token_embd.weight", w(n_vocab, n_embd))
    writer.add_tensor("output_norm.weight", np.ones(n_embd, dtype=np.float32))
    writer.add_tensor("output.weight", w(n_vocab, n_embd))
    writer.add_tensor("blk.0.attn_norm.weight", np.ones(n_embd, dtype=np.float32))
    writer.add_tensor("blk.0.attn_q.weight", w(n_embd, n_embd))
    writer.add_tensor("blk.0.attn_k.weight", w(n_head_kv * head_dim, n_embd))
    writer.add_tensor("blk.0.attn_v.weight", w(n_head_kv * head_dim, n_embd))
    writer.add_tensor("blk.0.attn_output.weight", w(n_embd, n_embd))
    writer.add_tensor("blk.0.ffn_norm.weight", np.ones(n_embd, dtype=np.float32))
    writer.add_tensor("blk.0.ffn_gate.weight", w(n_ff, n_embd))
    writer.add_tensor("blk.0.ffn_up.weight", w(n_ff, n_embd))
    writer.add_tensor("blk.0.ffn_down.weight", w(n_embd, n_ff))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path
