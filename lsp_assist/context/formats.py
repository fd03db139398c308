"""Prompt formats: fill-in-the-middle, repository-level prefix-only, and comment headers.

The format is read from the model's metadata (:class:`ModelInfo`, from
``lsp_assist.backends.vocab.read_model_info`` for every caller): its FIM token ids and
the special tokens its vocabulary has. Families recognised:

- ``qwen``: Qwen2.5-Coder (``<|fim_prefix|>`` ... plus ``<|repo_name|>``/``<|file_sep|>``)
- ``starcoder``: StarCoder/StarCoder2 (``<fim_prefix>`` ..., ``<repo_name>``/``<file_sep>``)
- ``codellama``: CodeLlama (``▁<PRE>``, ``▁<SUF>``, ``▁<MID>``)
- ``deepseek``: DeepSeek-Coder (``<｜fim▁begin｜>``, ``<｜fim▁hole｜>``, ``<｜fim▁end｜>``)
- ``codestral``: Codestral (``[SUFFIX]`` suffix ``[PREFIX]`` prefix: suffix first)
- ``codegemma``: CodeGemma (``<|fim_prefix|>`` ... with ``<|file_separator|>``)
- ``fim``: any other model whose GGUF names FIM ids (prefix-suffix-middle order)
- ``repo``: no FIM but repository tokens (the packaged SmolLM2: ``<repo_name>``,
  ``<file_sep>``, ``<filename>``): a prefix-only layout, one block per source file
- ``comment``: neither (the default Gemma-3-270M): context as comment headers

The token list is always built here from ids, never through llama-cpp-python's
broken ``suffix=`` path (FIELD-NOTES).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from lsp_assist.backends.base import ModelInfo

FormatName = Literal["fim", "repo", "comment"]
FimOrder = Literal["psm", "spm"]

_LINE_COMMENT: dict[str, str] = {
    "python": "#",
    "ruby": "#",
    "shell": "#",
    "bash": "#",
    "yaml": "#",
    "toml": "#",
    "r": "#",
    "lua": "--",
    "sql": "--",
    "haskell": "--",
}

_FAMILIES: tuple[tuple[str, tuple[str, str, str]], ...] = (
    ("qwen", ("<|fim_prefix|>", "<|fim_suffix|>", "<|fim_middle|>")),
    ("starcoder", ("<fim_prefix>", "<fim_suffix>", "<fim_middle>")),
    ("codellama", ("▁<PRE>", "▁<SUF>", "▁<MID>")),
    ("codellama", ("<PRE>", "<SUF>", "<MID>")),
    ("deepseek", ("<｜fim▁begin｜>", "<｜fim▁hole｜>", "<｜fim▁end｜>")),
    ("codestral", ("[PREFIX]", "[SUFFIX]", "[MIDDLE]")),
)

_REPO_NAME_TOKENS = ("<|repo_name|>", "<repo_name>", "<reponame>")
_FILE_SEP_TOKENS = ("<|file_sep|>", "<file_sep>")
_FILENAME_TOKEN = "<filename>"
_CODEGEMMA_FILE_SEP = "<|file_separator|>"
_NO_BOS_TEXTS = frozenset({"<|endoftext|>", "<|im_start|>", "<|im_end|>"})

FORMAT_TOKEN_TEXTS: frozenset[str] = frozenset(
    {
        *(text for _, texts in _FAMILIES for text in texts),
        *_REPO_NAME_TOKENS,
        *_FILE_SEP_TOKENS,
        _FILENAME_TOKEN,
        _CODEGEMMA_FILE_SEP,
        *_NO_BOS_TEXTS,
    }
)
"""Every special token text detection looks for: the vocabulary reader must report them
(``lsp_assist.backends.vocab.SPECIAL_TOKEN_NAMES``, checked by a test)."""


def comment_prefix(language: str) -> str:
    """Return the line-comment marker of ``language`` (``//`` for the C family)."""
    return _LINE_COMMENT.get(language, "//")


@dataclass(frozen=True, kw_only=True)
class PromptFormat:
    """How a prompt is laid out for one model."""

    name: FormatName
    family: str
    order: FimOrder = "psm"
    fim_prefix_id: int | None = None
    fim_suffix_id: int | None = None
    fim_middle_id: int | None = None
    repo_name_token: str = ""
    """Special token text opening the repository header, '' when none."""
    file_sep_token: str = ""
    """Special token text opening one file block, '' when none."""
    filename_token: str = ""
    """Special token text before a file name when the model has no file separator."""
    bos_id: int | None = None
    """BOS id to put first, or None when the format does not want one."""
    token_text: dict[int, str] = field(default_factory=dict)
    """Text of the special ids used (for the prompt text and explain)."""

    @property
    def is_fim(self) -> bool:
        """True for fill-in-the-middle formats (the suffix is in the prompt)."""
        return self.name == "fim"

    @property
    def has_repo_tokens(self) -> bool:
        """True when context files are laid out as repository file blocks."""
        return bool(self.file_sep_token or self.filename_token)

    @property
    def carries_project_summary(self) -> bool:
        """False for FIM formats with repository tokens (Qwen2.5-Coder, StarCoder).

        Their trained layout has file blocks only; the summary's comment lines after the
        repository name cost Qwen2.5-Coder-0.5B 3 of 27 HumanEval tasks and added nothing
        on the cross-file tasks (docs/context.md).
        """
        return not (self.is_fim and self.has_repo_tokens)

    def text_of(self, token: int | None) -> str:
        """Return the written-out text of a special id."""
        if token is None:
            return ""
        return self.token_text.get(token, f"<|special:{token}|>")

    def file_header(self, path: str) -> list[tuple[str, bool]]:
        """Return the pieces (text, is_special) opening the block of file ``path``."""
        if self.file_sep_token:
            return [(self.file_sep_token, True), (f"{path}\n", False)]
        if self.filename_token:
            return [(self.filename_token, True), (f"{path}\n", False)]
        return []

    def repo_header(self, repo: str) -> list[tuple[str, bool]]:
        """Return the pieces opening the prompt's repository header ('' when none)."""
        if not self.repo_name_token:
            return []
        return [(self.repo_name_token, True), (f"{repo}\n", False)]


def _lookup(info: ModelInfo, *texts: str) -> str:
    for text in texts:
        if text in info.special_tokens:
            return text
    return ""


def _wants_bos(info: ModelInfo, family: str) -> bool:
    if info.bos_id is None:
        return False
    if family in ("qwen", "starcoder", "repo"):
        return False
    if info.eos_id is not None and info.bos_id == info.eos_id:
        return False
    names = {tid: text for text, tid in info.special_tokens.items()}
    return names.get(info.bos_id, "") not in _NO_BOS_TEXTS


def detect_format(info: ModelInfo) -> PromptFormat:
    """Return the prompt format of a model from its FIM ids and special tokens."""
    specials = info.special_tokens
    family = ""
    ids: tuple[int | None, int | None, int | None] = (
        info.fim_prefix_id,
        info.fim_suffix_id,
        info.fim_middle_id,
    )
    for name, (pre_text, suf_text, mid_text) in _FAMILIES:
        if pre_text in specials and suf_text in specials:
            family = name
            ids = (
                info.fim_prefix_id if info.fim_prefix_id is not None else specials.get(pre_text),
                info.fim_suffix_id if info.fim_suffix_id is not None else specials.get(suf_text),
                info.fim_middle_id if info.fim_middle_id is not None else specials.get(mid_text),
            )
            break
    if family == "qwen" and "<|repo_name|>" not in specials and _CODEGEMMA_FILE_SEP in specials:
        family = "codegemma"
    repo_tok = _lookup(info, *_REPO_NAME_TOKENS)
    sep_tok = _lookup(info, *_FILE_SEP_TOKENS)
    fname_tok = _lookup(info, _FILENAME_TOKEN)
    token_text = {tid: text for text, tid in sorted(specials.items())}
    pre, suf, mid = ids
    fim_ok = pre is not None and suf is not None and (mid is not None or family == "codestral")
    if not family and fim_ok:
        family = "fim"
    if family and fim_ok:
        if family == "codegemma":
            repo_tok = sep_tok = fname_tok = ""
        return PromptFormat(
            name="fim",
            family=family,
            order="spm" if family == "codestral" else "psm",
            fim_prefix_id=pre,
            fim_suffix_id=suf,
            fim_middle_id=mid,
            repo_name_token=repo_tok if sep_tok else "",
            file_sep_token=sep_tok,
            bos_id=info.bos_id if _wants_bos(info, family) else None,
            token_text=token_text,
        )
    if sep_tok or fname_tok:
        return PromptFormat(
            name="repo",
            family="repo",
            repo_name_token=repo_tok,
            file_sep_token=sep_tok,
            filename_token="" if sep_tok else fname_tok,
            bos_id=info.bos_id if _wants_bos(info, "repo") else None,
            token_text=token_text,
        )
    return PromptFormat(
        name="comment",
        family="comment",
        bos_id=info.bos_id if _wants_bos(info, "comment") else None,
        token_text=token_text,
    )
