"""A GGUF model's vocabulary and metadata as llama.cpp reads them: the one vocabulary reader.

This module owns:

- :func:`llama_cpp_lib`: the import of llama-cpp-python, initialised once (backend,
  llama.cpp's log routed to Python logging);
- :data:`SPECIAL_TOKEN_NAMES`: the one table of special token texts (FIM, repository,
  turn markers) that prompt formats are detected from;
- :class:`Vocabulary`: a loaded model's tokenizer (tokenize, token pieces and texts,
  end-of-generation tests); ``Vocabulary(path)`` is a vocabulary-only load (no
  weights), the serving backend's :class:`~lsp_assist.backends.llama_engine.LlamaEngine` is
  the same class with weights and a context;
- :func:`read_model_info`: the :class:`ModelInfo` (FIM ids, special tokens, BOS/EOS,
  quantization, training context) of a loaded vocabulary;
- :class:`VocabularyBackend`: a vocabulary-only load behind the backend contract, which
  tokenizes and refuses to generate (``lsp-assist context`` builds prompts with it).

``lsp-assist serve``, ``lsp-assist context``, ``lsp-assist doctor`` and the remote
backend's local tokenizer all read a model through here, so they detect the same prompt
format and tokenize the same way. The context package never imports llama_cpp; it gets
a tokenizer and a ``ModelInfo`` from here.
"""

from __future__ import annotations

import ctypes
import logging
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from lsp_assist.backends.base import Backend, GenerationRequest, GenerationResult, ModelInfo
from lsp_assist.backends.gguf_meta import GGUFHeader, read_gguf_header
from lsp_assist.errors import BackendError, ModelLoadError

# llama.cpp's own log lines; the name predates this module and is what users configure
_native_logger = logging.getLogger("lsp_assist.backends.llama.native")

SPECIAL_TOKEN_NAMES: tuple[str, ...] = (
    # Qwen2.5-Coder (FIM + repository), CodeGemma (FIM + file separator)
    "<|fim_prefix|>",
    "<|fim_suffix|>",
    "<|fim_middle|>",
    "<|fim_pad|>",
    "<|repo_name|>",
    "<|file_sep|>",
    "<|file_separator|>",
    # StarCoder/StarCoder2, SmolLM2 (repository tokens only)
    "<fim_prefix>",
    "<fim_suffix>",
    "<fim_middle>",
    "<fim_pad>",
    "<repo_name>",
    "<reponame>",
    "<file_sep>",
    "<filename>",
    "<gh_stars>",
    # CodeLlama (the SPM vocabulary writes them with a leading "▁")
    "▁<PRE>",
    "▁<SUF>",
    "▁<MID>",
    "▁<EOT>",
    "<PRE>",
    "<SUF>",
    "<MID>",
    "<EOT>",
    # DeepSeek-Coder (full-width bars and "▁"), and the ASCII spelling some conversions use
    "<｜fim▁begin｜>",
    "<｜fim▁hole｜>",
    "<｜fim▁end｜>",
    "<|fim_begin|>",
    "<|fim_hole|>",
    "<|fim_end|>",
    # Codestral (suffix first)
    "[PREFIX]",
    "[SUFFIX]",
    "[MIDDLE]",
    # begin/end and turn markers (whether the format wants a BOS)
    "<|endoftext|>",
    "<|im_start|>",
    "<|im_end|>",
    "<|begin_of_text|>",
    "<|end_of_text|>",
    "<|endofprompt|>",
    "<start_of_turn>",
    "<end_of_turn>",
    "<bos>",
    "<eos>",
    "<s>",
    "</s>",
)
"""Special token texts reported in ``ModelInfo.special_tokens`` when the vocabulary has them."""

_ABORT_NOISE = ("failed to compute graph", "compute_async failed", "failed to decode, ret = 2")

_backend_lock = threading.Lock()
_backend_ready = False
_log_callback: Any = None


def llama_cpp_lib() -> Any:
    """Return the llama_cpp module, its backend initialised and its log routed, once."""
    global _backend_ready, _log_callback
    try:
        import llama_cpp
    except ImportError as exc:  # pragma: no cover - a dependency
        raise ModelLoadError(f"llama-cpp-python is not installed: {exc}") from exc
    with _backend_lock:
        if not _backend_ready:
            # ggml_log_level: 1 debug, 2 info, 3 warn, 4 error, 5 continuation
            levels = {3: logging.INFO, 4: logging.ERROR}
            last = [logging.DEBUG]

            @llama_cpp.llama_log_callback  # type: ignore[untyped-decorator]
            def _on_log(level: int, text: bytes, _user: ctypes.c_void_p) -> None:
                try:
                    py_level = last[0] if level == 5 else levels.get(level, logging.DEBUG)
                    last[0] = py_level
                    msg = text.decode("utf-8", errors="replace").rstrip()
                    if py_level == logging.ERROR and any(m in msg for m in _ABORT_NOISE):
                        py_level = logging.DEBUG  # an abort we asked for, not an error
                    if msg:
                        _native_logger.log(py_level, "%s", msg)
                except Exception:  # pragma: no cover - never raise into C
                    return

            _log_callback = _on_log
            llama_cpp.llama_log_set(_log_callback, ctypes.c_void_p(0))
            llama_cpp.llama_backend_init()
            _backend_ready = True
    return llama_cpp


def gpu_offload_available() -> bool:
    """Return True when this llama.cpp build can offload layers (CUDA, Metal, ...)."""
    try:
        return bool(llama_cpp_lib().llama_supports_gpu_offload())
    except ModelLoadError:
        return False


class Vocabulary:
    """A GGUF model loaded by llama.cpp, seen as its tokenizer and metadata.

    ``Vocabulary(path)`` loads the vocabulary only (no weights: about a second for
    Gemma's 262k tokens); ``vocab_only=False`` loads the weights too (what
    :class:`~lsp_assist.backends.llama_engine.LlamaEngine` does before creating a context).
    """

    def __init__(self, path: str | Path, *, vocab_only: bool = True, gpu_layers: int = 0) -> None:
        self.path = Path(path).expanduser()
        self.model: Any = None
        self.header: GGUFHeader = read_gguf_header(self.path)
        ll = llama_cpp_lib()
        self._ll = ll
        self._info: ModelInfo | None = None
        mparams = ll.llama_model_default_params()
        mparams.n_gpu_layers = 0x7FFFFFFF if gpu_layers < 0 else gpu_layers
        mparams.vocab_only = vocab_only
        if hasattr(mparams, "use_extra_bufts"):
            # the AMX buffer type segfaults on the first decode (docs/backends.md)
            mparams.use_extra_bufts = False
        try:
            self.model = ll.llama_model_load_from_file(str(self.path).encode("utf-8"), mparams)
        except (OSError, ValueError) as exc:
            raise ModelLoadError(f"llama.cpp could not load {self.path}: {exc}") from exc
        if not self.model:
            raise ModelLoadError(
                f"llama.cpp could not load {self.path} (architecture "
                f"{self.header.architecture or 'unknown'}): see the log for its reason"
            )
        self.vocab: Any = ll.llama_model_get_vocab(self.model)
        self.n_vocab = int(ll.llama_vocab_n_tokens(self.vocab))

    def _check_open(self) -> None:
        if not self.model:
            raise BackendError(f"the model {self.path.name} is closed")

    def tokenize(self, text: str, *, special: bool = False) -> list[int]:
        """Return token ids (no BOS); ``special`` parses special-token text.

        The output buffer is sized to the text (a token covers at least one byte):
        ``Llama.tokenize`` allocates one the size of the training context per call.
        """
        self._check_open()
        if not text:
            return []
        ll = self._ll
        raw = text.encode("utf-8")
        cap = len(raw) + 8
        buf = (ll.llama_token * cap)()
        n = ll.llama_tokenize(self.vocab, raw, len(raw), buf, cap, False, special)
        if n < 0:  # more tokens than bytes: not expected, but llama.cpp says how many
            cap = -n
            buf = (ll.llama_token * cap)()
            n = ll.llama_tokenize(self.vocab, raw, len(raw), buf, cap, False, special)
            if n < 0:
                raise BackendError(f"tokenization failed ({n})")
        return list(buf[:n])

    def piece(self, token: int, *, special: bool = True) -> bytes:
        """Return the bytes of one token."""
        ll = self._ll
        buf = ctypes.create_string_buffer(64)
        n = ll.llama_token_to_piece(self.vocab, token, buf, 64, 0, special)
        if n < 0:
            buf = ctypes.create_string_buffer(-n)
            n = ll.llama_token_to_piece(self.vocab, token, buf, -n, 0, special)
        return buf.raw[: max(n, 0)]

    def detokenize(self, tokens: Sequence[int], *, special: bool = False) -> str:
        """Return the text of ``tokens`` (``special``: special tokens written out)."""
        self._check_open()
        return b"".join(self.piece(t, special=special) for t in tokens).decode(
            "utf-8", errors="replace"
        )

    def token_text(self, token: int) -> str:
        """Return the vocabulary text of ``token``."""
        raw = self._ll.llama_vocab_get_text(self.vocab, token)
        return raw.decode("utf-8", errors="replace") if raw else ""

    def is_special(self, token: int) -> bool:
        """True for control and user-defined tokens (made only from special text)."""
        ll = self._ll
        wanted = ll.LLAMA_TOKEN_ATTR_CONTROL | ll.LLAMA_TOKEN_ATTR_USER_DEFINED
        return bool(int(ll.llama_vocab_get_attr(self.vocab, token)) & wanted)

    def is_eog(self, token: int) -> bool:
        """True for end-of-generation tokens."""
        return bool(self._ll.llama_vocab_is_eog(self.vocab, token))

    def is_control(self, token: int) -> bool:
        """True for control tokens."""
        return bool(self._ll.llama_vocab_is_control(self.vocab, token))

    def meta(self, key: str) -> str:
        """Return a metadata value as a string ('' when absent)."""
        buf = ctypes.create_string_buffer(512)
        n = self._ll.llama_model_meta_val_str(self.model, key.encode(), buf, 512)
        return buf.value.decode("utf-8", errors="replace") if n >= 0 else ""

    def info(self) -> ModelInfo:
        """Return the model's :class:`ModelInfo` (read once, see :func:`read_model_info`)."""
        if self._info is None:
            self._info = read_model_info(self)
        return self._info

    def close(self) -> None:
        """Free the model (idempotent)."""
        if self.model:
            self._ll.llama_model_free(self.model)
            self.model = None


def read_model_info(vocab: Vocabulary) -> ModelInfo:
    """Return what a loaded model says about itself (works on vocabulary-only loads)."""
    ll = vocab._ll

    def tok(value: int) -> int | None:
        return int(value) if value is not None and int(value) >= 0 else None

    # a vocabulary-only load reports F32 and a training context of 0, so the file's
    # own header comes first
    header = vocab.header
    ftype = header.get_int("general.file_type")
    ftype_name = ""
    try:
        raw = ll.llama_ftype_name(ftype if ftype is not None else ll.llama_model_ftype(vocab.model))
        ftype_name = raw.decode() if raw else ""
    except (AttributeError, OSError):  # older builds lack llama_ftype_name
        ftype_name = ""
    n_ctx_train = header.get_int(f"{header.architecture}.context_length")
    if n_ctx_train is None:
        n_ctx_train = int(ll.llama_model_n_ctx_train(vocab.model))
    # scan the vocabulary rather than tokenizing the names: some SPM vocabularies
    # without byte tokens make llama.cpp's tokenizer abort on unknown characters
    wanted = set(SPECIAL_TOKEN_NAMES)
    specials: dict[str, int] = {}
    for token in range(vocab.n_vocab):  # ~1 s for Gemma's 262k tokens here
        text = vocab.token_text(token)
        if text in wanted and text not in specials and vocab.is_special(token):
            specials[text] = token
    return ModelInfo(
        path=str(vocab.path),
        name=vocab.meta("general.name") or vocab.path.stem,
        architecture=vocab.meta("general.architecture"),
        quantization=ftype_name,
        vocab_size=vocab.n_vocab,
        context_length_train=n_ctx_train,
        bos_id=tok(ll.llama_vocab_bos(vocab.vocab)),
        eos_id=tok(ll.llama_vocab_eos(vocab.vocab)),
        fim_prefix_id=tok(ll.llama_vocab_fim_pre(vocab.vocab)),
        fim_suffix_id=tok(ll.llama_vocab_fim_suf(vocab.vocab)),
        fim_middle_id=tok(ll.llama_vocab_fim_mid(vocab.vocab)),
        special_tokens=specials,
    )


class VocabularyBackend(Backend):
    """A backend that only tokenizes (a vocabulary-only load): enough to build prompts."""

    name = "vocabulary"

    def __init__(self, path: str | Path) -> None:
        self.vocab = Vocabulary(path)
        self._info = self.vocab.info()

    @property
    def info(self) -> ModelInfo:
        """Metadata of the model, read from its vocabulary."""
        return self._info

    def tokenize(self, text: str, *, special: bool = False) -> list[int]:
        """Return the model's token ids for ``text`` (no BOS)."""
        return self.vocab.tokenize(text, special=special)

    def detokenize(self, tokens: Sequence[int]) -> str:
        """Return the text of ``tokens``."""
        return self.vocab.detokenize(tokens)

    def generate(self, request: GenerationRequest) -> GenerationResult:
        """Refuse: no weights are loaded."""
        raise BackendError("a vocabulary-only load cannot generate")

    def close(self) -> None:
        """Release the vocabulary."""
        self.vocab.close()
