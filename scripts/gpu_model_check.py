"""A packaged GGUF on the GPU, checked and timed beside the same model on the CPU.

Run by ``scripts/cuda_check.sh model GGUF [DRAFT_GGUF]`` on a CUDA machine (docs/backends.md,
"GPU offload"). Each arm runs in a subprocess of its own, so a crash in llama.cpp's
load (seen on the first GPU session) is reported with its exit status and the arms
after it still run. Per arm, on one line of JSON:

- the layers llama.cpp reports offloaded (``offloaded N/M layers to GPU``);
- a fill-in-the-middle answer that needs the suffix (the model's own FIM tokens);
- a cold prefill of ~1,500 tokens of the running Python's ``argparse.py``, tokens/s;
- greedy decoding of 96 tokens after it: plain, prompt lookup, and the draft model when
  one is given, tokens/s, acceptance, and whether each drafted output equals plain
  decoding token for token.

Run: python3 scripts/gpu_model_check.py --model GGUF [--draft-model GGUF] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import logging
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

FIM_PREFIX = "def fibonacci(n):\n    if n < 2:\n        return n\n    return "
FIM_SUFFIX = '\n\n\nif __name__ == "__main__":\n    print(fibonacci(10))\n'
PREFILL_TOKENS = 1500
DECODE_TOKENS = 96


def _arm(model: str, draft_model: str, gpu_layers: int) -> dict[str, Any]:
    """Load the model, answer one FIM request and time prefill and decoding."""
    import argparse as argparse_module

    from lsp_assist.backends.base import GenerationRequest
    from lsp_assist.backends.llama import LocalBackend
    from lsp_assist.config import ModelSettings

    messages: list[str] = []

    class _Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            messages.append(record.getMessage())

    native = logging.getLogger("lsp_assist.backends.llama.native")
    native.setLevel(logging.DEBUG)
    native.addHandler(_Keep())
    settings = ModelSettings(
        context_length=4096,
        gpu_layers=gpu_layers,
        draft="model" if draft_model else "prompt-lookup",
        draft_model_path=draft_model,
        batch_invariant=True,  # drafted output must equal plain (off by default)
        prompt_timeout_ms=600_000,
        generation_timeout_ms=600_000,
    )
    t0 = time.perf_counter()
    backend = LocalBackend(settings, model_path=Path(model))
    out: dict[str, Any] = {"load_s": round(time.perf_counter() - t0, 2)}
    found = re.findall(r"offloaded (\d+)/(\d+) layers to GPU", "\n".join(messages))
    out["offloaded"] = [f"{a}/{b}" for a, b in found]
    info = backend.info
    out["model_name"] = info.name
    fim = info.fim_prefix_id, info.fim_suffix_id, info.fim_middle_id
    if None not in fim:
        prompt = [
            fim[0],
            *backend.tokenize(FIM_PREFIX),
            fim[1],
            *backend.tokenize(FIM_SUFFIX),
            fim[2],
        ]
        result = backend.generate(
            GenerationRequest(prompt_tokens=prompt, max_tokens=24, stop=["\n"])
        )
        out["fim_answer"] = result.text
    text = Path(argparse_module.__file__).read_text()
    tokens = backend.tokenize(text)[:PREFILL_TOKENS]
    modes = ["off", "prompt-lookup"] + (["model"] if draft_model else [])
    plain: list[int] = []
    for mode in modes:
        backend.set_draft_mode(mode)
        backend._engine.clear()
        if backend._draft_engine is not None:
            backend._draft_engine.clear()
        result = backend.generate(
            GenerationRequest(prompt_tokens=tokens, max_tokens=DECODE_TOKENS, draft=mode != "off")
        )
        arm: dict[str, Any] = {
            "prefill_tok_s": round(len(tokens) / (result.prefill_ms / 1000.0), 1),
            "decode_tok_s": round(max(1, len(result.tokens) - 1) / (result.decode_ms / 1000.0), 1),
            "tokens": len(result.tokens),
        }
        if mode == "off":
            plain = result.tokens
        else:
            arm["acceptance"] = round(result.draft_accepted / max(1, result.draft_proposed), 2)
            arm["equals_plain"] = result.tokens == plain
        out[mode] = arm
    backend.close()
    return out


def main() -> int:
    """Run each arm in its own process and print one JSON line per arm."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True)
    parser.add_argument("--draft-model", default="")
    parser.add_argument("--json", default="")
    parser.add_argument("--arm", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.arm:
        gpu_layers = int(args.arm)
        print(json.dumps(_arm(args.model, args.draft_model, gpu_layers)), flush=True)
        return 0
    rows = []
    arms = [("gpu", -1), ("cpu", 0)]
    for name, layers in arms:
        for draft in [""] + ([args.draft_model] if args.draft_model else []):
            label = f"{name}{'+draft' if draft else ''}"
            cmd = [sys.executable, __file__, "--model", args.model, "--arm", str(layers)]
            if draft:
                cmd += ["--draft-model", draft]
            t0 = time.perf_counter()
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
            row: dict[str, Any] = {"arm": label, "rc": proc.returncode}
            row["wall_s"] = round(time.perf_counter() - t0, 1)
            lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
            if lines:
                row.update(json.loads(lines[-1]))
            else:
                row["stderr_tail"] = proc.stderr[-1500:]
            print(json.dumps(row), flush=True)
            rows.append(row)
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))
    return 0 if all(r["rc"] == 0 for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
