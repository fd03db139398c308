"""Model infos of the context tests: the special tokens of five model families.

The index is never faked here: tests index a temporary folder with the real
``WorkspaceIndex`` (``tests/support/workspace.py``).
"""

from __future__ import annotations

from lsp_assist.backends.base import ModelInfo

GEMMA_LIKE = ModelInfo(path="gemma.gguf", bos_id=2, eos_id=1, special_tokens={"<bos>": 2})
SMOLLM_LIKE = ModelInfo(
    path="smol.gguf",
    bos_id=1,
    eos_id=2,
    special_tokens={"<|im_start|>": 1, "<repo_name>": 3, "<file_sep>": 5, "<filename>": 6},
)
QWEN_LIKE = ModelInfo(
    path="qwen.gguf",
    bos_id=151643,
    eos_id=151643,
    fim_prefix_id=151659,
    fim_suffix_id=151661,
    fim_middle_id=151660,
    special_tokens={
        "<|endoftext|>": 151643,
        "<|fim_prefix|>": 151659,
        "<|fim_middle|>": 151660,
        "<|fim_suffix|>": 151661,
        "<|repo_name|>": 151663,
        "<|file_sep|>": 151664,
    },
)
CODESTRAL_LIKE = ModelInfo(
    path="codestral.gguf",
    bos_id=1,
    eos_id=2,
    fim_prefix_id=32,
    fim_suffix_id=33,
    special_tokens={"<s>": 1, "</s>": 2, "[PREFIX]": 32, "[SUFFIX]": 33},
)
CODELLAMA_LIKE = ModelInfo(
    path="codellama.gguf",
    bos_id=1,
    eos_id=2,
    fim_prefix_id=32007,
    fim_suffix_id=32008,
    fim_middle_id=32009,
    special_tokens={"<s>": 1, "</s>": 2, "▁<PRE>": 32007, "▁<SUF>": 32008, "▁<MID>": 32009},
)
