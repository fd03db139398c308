"""Settings: kw-only dataclasses with defaults, parsed leniently from editors, CLI and env.

Every setting has one flat camelCase key (``modelPath``, ``contextBudget`` ...) used in
LSP initializationOptions and workspace/didChangeConfiguration, and an environment
variable ``LSP_ASSIST_<UPPER_SNAKE>`` for the CLI. An invalid value never raises: it is
reported as a warning naming the key and the default is kept. An integer above what the
machine or the native code behind it can hold (threads past the CPUs, caches past the
memory, token counts, timeouts) is clamped to that bound, with a warning naming the key.
docs/configuration.md lists every setting and its bound; ``tests/unit/test_config.py``
checks the two stay in step.
"""

from __future__ import annotations

import dataclasses
import os
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, NamedTuple, get_args, get_origin, get_type_hints

DraftMode = Literal["auto", "prompt-lookup", "model", "off"]
Strategy = Literal["layered", "baseline"]
BackendKind = Literal["local", "remote"]
MultilineMode = Literal["auto", "always", "never"]
NextEditMode = Literal["off", "symbolic", "model", "both"]
NextEditFormat = Literal["auto", "sweep", "instruct"]
RemoteApi = Literal["auto", "completions", "infill"]


@dataclass(kw_only=True)
class ModelSettings:
    """Which model runs and how (in-process llama.cpp or a remote server)."""

    backend: BackendKind = "local"
    model: str = "coder-0.5b"
    """A packaged preset (``coder-0.5b``, ``coder-1.5b``, ``gemma-270m``) or a GGUF path."""
    model_path: str = ""
    """Path of a GGUF; when given it wins over ``model``."""
    draft_model_path: str = ""
    """Draft GGUF; empty: the preset's own draft (``coder-1.5b`` drafts with ``coder-0.5b``)."""
    threads: int = 0
    """CPU threads for llama.cpp; 0 means all cores."""
    context_length: int = 4096
    batch_size: int = 512
    gpu_layers: int = 0
    draft: DraftMode = "off"
    """Off: on every machine measured drafting answered later (docs/decisions.md,
    "Drafting off by default"). ``auto``: the draft model when there is one, else prompt
    lookup; off with every layer on a GPU."""
    draft_tokens: int = 4
    draft_min_acceptance: float = 0.5
    batch_invariant: bool = False
    """Decode 2-7 rows per step so greedy output is the same with drafting on or off."""
    kv_reuse: bool = True
    """Reuse the KV cache's common prompt prefix between requests (off only to compare)."""
    kv_cache_mb: int = 256
    """Byte cap of the per-file KV state LRU."""
    kv_memory_threshold: float = 0.90
    """System memory use (fraction) above which saved KV states are dropped, oldest first."""
    prompt_timeout_ms: int = 5000
    generation_timeout_ms: int = 5000
    remote_url: str = "http://127.0.0.1:8080"
    remote_model: str = ""
    remote_api_key_env: str = "LSP_ASSIST_API_KEY"
    remote_connect_timeout_ms: int = 2000
    remote_read_timeout_ms: int = 30000
    remote_retries: int = 2
    remote_api: RemoteApi = "auto"
    """``completions``: a raw prompt on ``/v1/completions``; ``infill``: llama-server's
    ``/infill`` (prefix, suffix and related code as extra files); ``auto``: ``infill``
    where the server offers it, else ``completions``."""


@dataclass(kw_only=True)
class IndexSettings:
    """What the workspace index reads and how it stays current."""

    max_file_bytes: int = 1_000_000
    deny_globs: list[str] = field(default_factory=list)
    """Extra globs never indexed nor read into a prompt (on top of the built-in secret list)."""
    exclude_globs: list[str] = field(default_factory=list)
    watch: bool = True
    file_cache_mb: int = 64
    persist: bool = True


@dataclass(kw_only=True)
class ContextSettings:
    """How the prompt is assembled: layers, budget, retrieval thresholds."""

    strategy: Strategy = "layered"
    context_budget: int = 1024
    """Total prompt tokens when given (``Settings.given_keys``); otherwise the serving
    engine chooses the budget from the measured prompt speed (serving/adaptive_budget.py)
    and this default is only the budget used before anything is measured."""
    cold_prompt_ms: int = 500
    """Adaptive budget: a whole prompt evaluated from nothing should take at most this."""
    context_budget_floor: int = 512
    """Adaptive budget: never fewer prompt tokens than this, however slow the machine."""
    editing_zone_ratio: float = 0.4
    related_ratio: float = 0.3
    summary_ratio: float = 0.2
    instructions_ratio: float = 0.1
    editing_zone_lines: int = 200
    """Most lines the editing zone takes; its token grant (and the room the other layers
    leave) usually binds first. 60 lost lines to plain FIM (docs/decisions.md)."""
    layer_file_summary: bool = True
    layer_project_summary: bool = True
    layer_related: bool = True
    layer_similar: bool = True
    layer_standard_library: bool = False
    """Related definitions and similar code from the running Python's standard library
    (or a copy of it): off, the code model knows that code (context/known_code.py)."""
    related_threshold: float = 0.3
    similar_threshold: float = 0.2
    recent_files: int = 10
    layer_vector: bool = False
    """Vector retrieval (docs/context.md, "Vector retrieval"): off until it earns its cost."""
    vector_threshold: float = 0.5
    """Cosine similarity under which a vector match is dropped."""
    vector_wait_ms: int = 0
    """How long a build waits for its query's embedding (not ready: no vectors this time)."""
    vector_model: str = ""
    """A BERT-family embedding GGUF; empty: the packaged all-MiniLM-L6-v2."""
    related_pins: list[str] = field(default_factory=list)
    """Definitions the related layer holds first, each ``[FILE[:LINE]=][PATH:]NAME``
    (workspace-relative paths, LINE 1-based; a scope holds the pin to that file or line):
    the cross-file benchmark's oracle row (context/retrieval/demand.py)."""
    related_line_names: bool = False
    """The definition of each name the line being written uses that the editing zone does
    not define and another file does enters the related layer first, in its long form; a
    new one makes the build fresh (docs/context.md, "What the line asks for")."""
    related_receivers: bool = False
    """At ``obj.`` or ``self.attr.``, the receiver's class (from annotations, assignments
    in ``__init__`` or above the cursor) with its member signatures enters first."""
    related_on_demand: bool = False
    """The related and similar layers hold only what the line asks for (pins, the
    line's names, the receiver): nothing cross-file when it asks for nothing."""


@dataclass(kw_only=True)
class CompletionSettings:
    """What the editor sees and when."""

    debounce_ms: int = 25
    answer_after_ms: int = 100
    """Answer with what the model has written once this long has passed since the request
    arrived (at least one visible character), and write the rest on in the background
    for the type-through cache (docs/serving.md, "Early answers"); 0: answer only with
    the whole suggestion."""
    confidence_threshold: float = 0.0
    """The confidence gate: an automatic suggestion whose first line's tokens have a
    geometric-mean probability under the model below this is not shown (serving/
    confidence.py); 0: off. An explicit ask is never gated; nor is a backend that gives
    no probabilities (remote)."""
    max_tokens: int = 48
    kept_lines: int = 4
    """Lines a single-line generation writes on past the shown line while no newer request
    waits, kept for the next lines (answered from memory after Enter; docs/serving.md,
    "Kept lines"); 0: the generation stops at the line end."""
    kept_tokens: int = 64
    """Tokens the kept lines may take beyond ``maxTokens``."""
    dynamic_multiline: bool = True
    """A single line at a line's end that opens a block (``:``, ``{``) is shown with the
    block's body the generation wrote on (its kept lines), as one suggestion (Cody's
    dynamic multi-line); needs ``keptLines`` above 0 (docs/serving.md, "Kept lines")."""
    next_line_at_end: bool = True
    """At the end of a line with code, where the model ends the line at once (nothing more
    to write on it), the suggestion is the line break and the model's next line (a ghost
    line below) instead of nothing, its lines after kept; needs ``keptLines`` above 0
    (docs/serving.md, "Kept lines")."""
    max_lines: int = 8
    multiline: MultilineMode = "auto"
    skip_in_strings: bool = False
    skip_in_comments: bool = True
    max_chars_right_of_cursor: int = 4
    cache_entries: int = 256
    max_line_chars: int = 10_000
    """A document with a longer line (minified code) gets no completions and no parsing."""
    alternatives: int = 3
    """Suggestions an explicit (Invoked) inline request returns for the client to cycle."""
    next_edit: NextEditMode = "symbolic"
    """Next edits (``textDocument/copilotInlineEdit``): ``symbolic`` from the syntax tree,
    ``model`` from the model's rewrite of a window around the cursor, ``both`` the
    symbolic ones then the model's that do not overlap them; ``off`` answers none."""
    next_edit_format: NextEditFormat = "auto"
    """The model source's prompt: ``sweep`` (Sweep's next-edit format), ``instruct`` (a
    chat turn); ``auto``: ``sweep`` for a Sweep next-edit model, else ``instruct``."""


@dataclass(kw_only=True)
class TelemetrySettings:
    """Where logs and metrics go."""

    metrics: bool = True
    log_prompts: bool = False
    cache_dir: str = ""
    """Per-user cache root; empty means $XDG_CACHE_HOME/lsp-assist or ~/.cache/lsp-assist."""
    log_level: str = "INFO"
    log_file: str = ""


@dataclass(kw_only=True)
class Settings:
    """All settings, grouped by the pipeline stage that reads them."""

    model: ModelSettings = field(default_factory=ModelSettings)
    index: IndexSettings = field(default_factory=IndexSettings)
    context: ContextSettings = field(default_factory=ContextSettings)
    completion: CompletionSettings = field(default_factory=CompletionSettings)
    telemetry: TelemetrySettings = field(default_factory=TelemetrySettings)
    given_keys: frozenset[str] = frozenset()
    """The camelCase keys a user gave a valid value for (over every parse that led here):
    how ``contextBudget`` set by the user is told from its default."""

    def replace(self, values: Mapping[str, Any]) -> tuple[Settings, list[str]]:
        """Return a copy with ``values`` (flat camelCase keys) applied, and the warnings."""
        return parse_settings(values, base=self)


_SECTIONS = ("model", "index", "context", "completion", "telemetry")
_LOG_LEVELS = {"DEBUG", "INFO", "WARNING", "ERROR"}


def camel(name: str) -> str:
    """Return the camelCase key of a snake_case field name."""
    head, *rest = name.split("_")
    return head + "".join(part.capitalize() for part in rest)


def _fields() -> Iterator[tuple[str, str, Any]]:
    for section in _SECTIONS:
        cls = type(getattr(Settings(), section))
        hints = get_type_hints(cls)
        for f in dataclasses.fields(cls):
            yield section, f.name, hints[f.name]


SETTING_KEYS: dict[str, tuple[str, str]] = {camel(name): (sec, name) for sec, name, _ in _fields()}
"""camelCase key -> (section, field name)."""


def _coerce(value: Any, hint: Any) -> Any:
    """Return ``value`` converted to ``hint`` or raise ValueError."""
    origin = get_origin(hint)
    if origin is Literal:
        choices = get_args(hint)
        if value in choices:
            return value
        raise ValueError(f"expected one of {', '.join(map(str, choices))}")
    if hint is bool:
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.lower() in (
            "1",
            "true",
            "yes",
            "on",
            "0",
            "false",
            "no",
            "off",
        ):
            return value.lower() in ("1", "true", "yes", "on")
        raise ValueError("expected true or false")
    if hint is int:
        if isinstance(value, bool):
            raise ValueError("expected an integer")
        if isinstance(value, int):
            return value
        if isinstance(value, str) and re.fullmatch(r"-?\d+", value.strip()):
            return int(value)
        raise ValueError("expected an integer")
    if hint is float:
        if isinstance(value, bool):
            raise ValueError("expected a number")
        if isinstance(value, int | float):
            return float(value)
        if isinstance(value, str):
            try:
                return float(value)
            except ValueError:
                pass
        raise ValueError("expected a number")
    if hint is str:
        if isinstance(value, str):
            return value
        raise ValueError("expected a string")
    if origin is list:
        if isinstance(value, str):
            value = [v for v in value.split(",") if v]
        if isinstance(value, list) and all(isinstance(v, str) for v in value):
            return list(value)
        raise ValueError("expected a list of strings")
    raise ValueError(f"unsupported type {hint}")


class Bounded(NamedTuple):
    """One structure's size against its bound, as ``lspAssist.memory`` lists it.

    ``by`` names what sets the bound: a setting's key (``cacheEntries``), a documented
    constant (``context/tokens.py TOKEN_CACHE_CHUNKS``), or the open documents for what is
    kept per open document (freed at didClose). docs/configuration.md, "What grows with
    use", lists every one.
    """

    size: int
    bound: int
    unit: str
    by: str


C_INT_MAX = 2**31 - 1
"""Bound of every integer setting without a tighter one: llama.cpp takes C ints, and
Python turns milliseconds and ratios into floats (10**400 / 1000 raises)."""
GGML_MAX_THREADS = 512
"""ggml sizes its thread tables for this many (``GGML_MAX_N_THREADS`` in ggml.h)."""
MAX_TOKENS = 1 << 20
"""Bound of token counts (1,048,576: the longest trained context of current GGUFs). The
model's own trained context and the KV memory it needs are the backend's checks."""
MAX_TIMEOUT_MS = 3_600_000
"""One hour: a cap on one request or one connection that is longer is no cap."""
MAX_DEBOUNCE_MS = 10_000
MAX_DRAFT_TOKENS = 32
"""llama.cpp reserves logits for 2 x draftTokens + 2 rows of every decode step."""
MAX_REMOTE_RETRIES = 10
MAX_ALTERNATIVES = 5
MAX_KEPT_LINES = 16
"""Kept lines beyond this are rarely reached by a typist before the next miss."""
"""Each alternative is one more greedy decode after the first: more is more waiting."""

_TOKEN_COUNTS = {
    "context_length",
    "batch_size",
    "context_budget",
    "context_budget_floor",
    "max_tokens",
    "kept_tokens",
}
_TIMEOUTS = {
    "prompt_timeout_ms",
    "generation_timeout_ms",
    "remote_connect_timeout_ms",
    "remote_read_timeout_ms",
}
_MEMORY_MB = {"kv_cache_mb", "file_cache_mb"}
_FIXED_BOUNDS = {
    "debounce_ms": MAX_DEBOUNCE_MS,
    "draft_tokens": MAX_DRAFT_TOKENS,
    "remote_retries": MAX_REMOTE_RETRIES,
    "cold_prompt_ms": MAX_TIMEOUT_MS,
    "vector_wait_ms": MAX_DEBOUNCE_MS,
    "answer_after_ms": MAX_DEBOUNCE_MS,
    "alternatives": MAX_ALTERNATIVES,
    "kept_lines": MAX_KEPT_LINES,
    **dict.fromkeys(_TOKEN_COUNTS, MAX_TOKENS),
    **dict.fromkeys(_TIMEOUTS, MAX_TIMEOUT_MS),
}


def machine_cpus() -> int:
    """Return the number of CPUs this process may run on (its affinity set)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # pragma: no cover - not Linux
        return max(1, os.cpu_count() or 1)


def machine_memory_mb() -> int:
    """Return the machine's physical memory in MiB (C_INT_MAX where it cannot be read)."""
    try:
        total = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (AttributeError, ValueError, OSError):  # pragma: no cover - not POSIX
        return C_INT_MAX
    return max(1, total // (1024 * 1024)) if total > 0 else C_INT_MAX


def upper_bound(name: str) -> tuple[int, str]:
    """Return the largest value of the integer setting ``name`` and what sets it."""
    if name == "threads":
        cpus = min(machine_cpus(), GGML_MAX_THREADS)
        return cpus, f"the {cpus} CPUs this process may use"
    if name in _MEMORY_MB:
        mb = machine_memory_mb()
        return mb, f"this machine's {mb} MB of memory"
    if name == "max_file_bytes":
        limit = min(machine_memory_mb() * 1024 * 1024, C_INT_MAX)
        return limit, f"{limit} bytes (memory, and tree-sitter's offsets)"
    if name in _FIXED_BOUNDS:
        return _FIXED_BOUNDS[name], f"the bound {_FIXED_BOUNDS[name]}"
    return C_INT_MAX, f"{C_INT_MAX} (a C int)"


def _shown(raw: Any) -> str:
    """Return ``repr(raw)``, or a description of an integer too long to print."""
    if isinstance(raw, int) and raw.bit_length() > 64:
        return f"a {raw.bit_length()}-bit integer"
    return repr(raw)


def _check_range(section: str, name: str, value: Any) -> None:
    """Raise ValueError for values of the right type that make no sense."""
    non_negative = {
        "threads",
        "gpu_layers",
        "remote_retries",
        "debounce_ms",
        "vector_wait_ms",
        "answer_after_ms",
        "kept_lines",
        "kept_tokens",
    }
    if isinstance(value, int) and not isinstance(value, bool):
        if name in non_negative and value < 0:
            raise ValueError("must be >= 0")
        if name not in non_negative and value <= 0:
            raise ValueError("must be > 0")
    fraction = name.endswith(("_ratio", "threshold")) or name == "draft_min_acceptance"
    if isinstance(value, float) and fraction and not 0.0 <= value <= 1.0:
        raise ValueError("must be between 0 and 1")
    if name == "log_level" and str(value).upper() not in _LOG_LEVELS:
        raise ValueError(f"expected one of {', '.join(sorted(_LOG_LEVELS))}")


def parse_settings(
    values: Mapping[str, Any] | None, *, base: Settings | None = None
) -> tuple[Settings, list[str]]:
    """Apply flat camelCase ``values`` over ``base`` (or defaults); return settings and warnings.

    Unknown keys and invalid values produce a warning naming the key; the previous value
    (the default, for a fresh parse) is kept. Nested ``{"lspAssist": {...}}`` is unwrapped.
    """
    settings = dataclasses.replace(base) if base is not None else Settings()
    for section in _SECTIONS:
        setattr(settings, section, dataclasses.replace(getattr(settings, section)))
    warnings: list[str] = []
    if values is None:
        return settings, warnings
    if not isinstance(values, Mapping):
        return settings, ["settings must be an object; using defaults"]
    if "lspAssist" in values and isinstance(values["lspAssist"], Mapping):
        values = values["lspAssist"]
    hints = {(sec, name): hint for sec, name, hint in _fields()}
    given = set(settings.given_keys)
    for key, raw in values.items():
        target = SETTING_KEYS.get(key)
        if target is None:
            warnings.append(f"unknown setting '{key}' ignored")
            continue
        section, name = target
        try:
            value = _coerce(raw, hints[target])
            _check_range(section, name, value)
        except ValueError as exc:
            default = getattr(getattr(settings, section), name)
            warnings.append(f"invalid setting '{key}' = {_shown(raw)}: {exc}; using {default!r}")
            continue
        if isinstance(value, int) and not isinstance(value, bool):
            bound, what = upper_bound(name)
            if value > bound:
                warnings.append(f"setting '{key}' = {_shown(raw)} is above {what}; using {bound}")
                value = bound
        if name == "log_level":
            value = str(value).upper()
        setattr(getattr(settings, section), name, value)
        given.add(key)
    settings.given_keys = frozenset(given)
    ratios = settings.context
    total = (
        ratios.editing_zone_ratio
        + ratios.related_ratio
        + ratios.summary_ratio
        + ratios.instructions_ratio
    )
    if total > 1.0 + 1e-6:
        warnings.append(f"context ratios add up to {total:.2f} > 1; using the defaults")
        defaults = ContextSettings()
        ratios.editing_zone_ratio = defaults.editing_zone_ratio
        ratios.related_ratio = defaults.related_ratio
        ratios.summary_ratio = defaults.summary_ratio
        ratios.instructions_ratio = defaults.instructions_ratio
    return settings, warnings


def env_overrides(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """Return the settings given as ``LSP_ASSIST_<UPPER_SNAKE>`` environment variables."""
    environ = os.environ if environ is None else environ
    found: dict[str, str] = {}
    for key, (_, name) in SETTING_KEYS.items():
        env_name = "LSP_ASSIST_" + name.upper()
        if env_name in environ:
            found[key] = environ[env_name]
    return found


def cache_root(settings: Settings) -> Path:
    """Return the per-user cache root (metrics, index databases)."""
    if settings.telemetry.cache_dir:
        return Path(settings.telemetry.cache_dir).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg) if xdg else Path.home() / ".cache"
    return base / "lsp-assist"


def workspace_cache_dir(settings: Settings, workspace: Path) -> Path:
    """Return the cache directory of one workspace (a stable hash of its path)."""
    import hashlib

    resolved = str(workspace.resolve())
    digest = hashlib.sha256(resolved.encode()).hexdigest()[:16]
    return cache_root(settings) / "workspaces" / f"{workspace.name or 'root'}-{digest}"
