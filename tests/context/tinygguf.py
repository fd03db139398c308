"""Tiny GGUF files (vocabulary and one tensor) written with the ``gguf`` package for tests."""

from __future__ import annotations

from pathlib import Path

import numpy as np


def write_tiny_gguf(
    path: Path,
    specials: list[str],
    fim: tuple[str | None, str | None, str | None] | None = None,
) -> Path:
    """Write a llama-architecture GGUF with an SPM vocabulary: ASCII, bytes and ``specials``."""
    import gguf

    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_name("tiny")
    writer.add_context_length(256)
    writer.add_embedding_length(32)
    writer.add_block_count(1)
    writer.add_feed_forward_length(64)
    writer.add_head_count(2)
    writer.add_head_count_kv(2)
    writer.add_layer_norm_rms_eps(1e-5)
    chars = [chr(c) for c in range(32, 127)] + ["\n", "\t"]
    tokens = ["<unk>", "<s>", "</s>", *specials, "▁", *chars]
    tokens += [f"<0x{b:02X}>" for b in range(256)]
    types = [2, 3, 3] + [3] * len(specials) + [1] * (1 + len(chars)) + [6] * 256
    writer.add_tokenizer_model("llama")
    writer.add_token_list(tokens)
    writer.add_token_scores([0.0] * len(tokens))
    writer.add_token_types(types)
    writer.add_bos_token_id(1)
    writer.add_eos_token_id(2)
    writer.add_unk_token_id(0)
    if fim is not None:
        for key, text in zip(("fim_pre", "fim_suf", "fim_mid"), fim, strict=True):
            if text is not None:
                writer.add_uint32(f"tokenizer.ggml.{key}_token_id", tokens.index(text))
    writer.add_tensor("token_embd.weight", np.zeros((len(tokens), 32), dtype=np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path
