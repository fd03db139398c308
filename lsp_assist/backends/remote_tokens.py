"""The remote backend's tokenizer: the server model's token ids, seen from the client.

The rest of lsp-assist counts and assembles prompts in token ids, so the client needs
the server model's tokenizer. :class:`RemoteTokenizer` uses, in order of preference:

1. ``local``: a vocabulary-only load of ``modelPath`` (the same GGUF the server runs);
   exact and fast, no network.
2. ``server``: the server's own tokenizer endpoints (``/extras/tokenize`` of
   llama-cpp-python, ``/tokenize`` of llama-server); exact, one round trip per call,
   made through the backend's capped, cancellable POST (:class:`PostJson`). What the
   server prepends (BOS) is learnt from tokenizing an empty string and stripped. A call
   that fails raises :class:`~lsp_assist.errors.RemoteBackendError`: a prompt is never
   assembled from a mix of server ids and estimates.
3. ``estimate``: no tokenizer at all (the server has no endpoint, vLLM or Ollama):
   :class:`~lsp_assist.backends.approx_tokens.ApproxTokenizer`, whose ids encode their
   text, so ``detokenize`` gives the text back exactly.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any, Protocol

from lsp_assist.backends.approx_tokens import ApproxTokenizer
from lsp_assist.backends.base import CancelToken
from lsp_assist.backends.vocab import Vocabulary
from lsp_assist.errors import RemoteBackendError

logger = logging.getLogger(__name__)

MAX_SERVER_ID = 1 << 24
"""Ids at or above this are not a server vocabulary's (estimated ids usually are)."""


class PostJson(Protocol):
    """POST a JSON body to the server within the prompt cap; return (status, JSON body)."""

    def __call__(
        self,
        path: str,
        body: dict[str, Any],
        *,
        cancel: CancelToken | None = None,
        deadline: float | None = None,
    ) -> tuple[int, Any]:
        """Raise RemoteBackendError or GenerationCancelled when the exchange fails."""
        ...


def server_ids(tokens: Sequence[int]) -> bool:
    """True when every id of ``tokens`` can be a server vocabulary's."""
    return all(0 <= t < MAX_SERVER_ID for t in tokens)


class RemoteTokenizer:
    """Tokenize and detokenize as the server's model does (see the module doc)."""

    def __init__(self, post: PostJson, *, vocab: Vocabulary | None, estimate: bool) -> None:
        self._post = post
        self.vocab = vocab
        self.mode = "local" if vocab is not None else "estimate" if estimate else "server"
        """``local``, ``server`` or ``estimate``; ``server`` turns into ``estimate`` once
        the server turns out to have no tokenizer endpoint."""
        self.server_prefix: list[int] = []
        """What the server's tokenizer prepends (BOS), stripped from its answers."""
        self._server_path: str | None = None
        self._approx = ApproxTokenizer()

    def _server_tokenize(self, text: str, special: bool) -> list[int] | None:
        """Tokenize on the server; None when it has no tokenizer endpoint."""
        candidates = [self._server_path] if self._server_path else ["/extras/tokenize", "/tokenize"]
        for path in candidates:
            assert path is not None
            body: dict[str, Any] = (
                {"input": text} if path == "/extras/tokenize" else {"content": text}
            )
            if path == "/tokenize":
                body["add_special"] = False
                body["parse_special"] = special
            status, data = self._post(path, body)
            if status in (404, 405):
                continue
            if status >= 400 or not isinstance(data, dict):
                raise RemoteBackendError(f"tokenize failed: HTTP {status}")
            tokens = [int(t) for t in data.get("tokens", [])]
            if self._server_path is None:
                self._server_path = path
                if text:  # learn what the server prepends (BOS) from an empty string
                    self.server_prefix = self._server_tokenize("", special) or []
            prefix = self.server_prefix
            if prefix and tokens[: len(prefix)] == prefix:
                tokens = tokens[len(prefix) :]
            return tokens
        return None

    def tokenize(self, text: str, *, special: bool = False) -> list[int]:
        """Return token ids without BOS (estimated ids in ``estimate`` mode).

        With the server's tokenizer, raises RemoteBackendError when the call fails or
        the circuit is open, and GenerationCancelled when the current request's token
        is cancelled meanwhile.
        """
        if self.vocab is not None:
            return list(self.vocab.tokenize(text, special=special))
        if self.mode == "server":
            tokens = self._server_tokenize(text, special)
            if tokens is not None:
                return tokens
            logger.info("the server has no tokenizer endpoint: estimating tokens")
            self.mode = "estimate"
        return self._approx.tokenize(text, special=special)

    def detokenize(
        self,
        tokens: Sequence[int],
        *,
        cancel: CancelToken | None = None,
        deadline: float | None = None,
    ) -> str:
        """Return the text of ``tokens`` (raises like :meth:`tokenize`)."""
        if self.vocab is not None:
            return str(self.vocab.detokenize(tokens, special=True))
        if self.mode == "server" and tokens and server_ids(tokens):
            path = "/extras/detokenize" if self._server_path != "/tokenize" else "/detokenize"
            status, data = self._post(
                path, {"tokens": list(tokens)}, cancel=cancel, deadline=deadline
            )
            if status >= 400 or not isinstance(data, dict):
                raise RemoteBackendError(f"detokenize failed: HTTP {status}")
            return str(data.get("text", data.get("content", "")))
        return self._approx.detokenize(tokens)

    def close(self) -> None:
        """Free the local vocabulary, if any."""
        if self.vocab is not None:
            self.vocab.close()
            self.vocab = None
