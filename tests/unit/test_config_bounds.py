"""Integer settings are clamped to what the machine and llama.cpp can hold, with a warning."""

from __future__ import annotations

import os

import psutil
import pytest

from lsp_assist.config import SETTING_KEYS, Settings, env_overrides, parse_settings

INT_KEYS = [
    key
    for key, (section, name) in SETTING_KEYS.items()
    if type(getattr(getattr(Settings(), section), name)) is int
]
CPUS = len(os.sched_getaffinity(0))


def _value(settings: Settings, key: str) -> object:
    section, name = SETTING_KEYS[key]
    return getattr(getattr(settings, section), name)


def test_threads_above_the_cpus_are_clamped_with_a_warning() -> None:
    settings, warnings = parse_settings({"threads": 100000})
    assert settings.model.threads == min(CPUS, 512)
    assert settings.model.threads <= (os.cpu_count() or 1)
    assert len(warnings) == 1
    assert "'threads'" in warnings[0] and "100000" in warnings[0]
    assert f"using {settings.model.threads}" in warnings[0]


@pytest.mark.parametrize("threads", [0, 1, CPUS])
def test_threads_within_the_cpus_are_kept(threads: int) -> None:
    settings, warnings = parse_settings({"threads": threads})
    assert warnings == []
    assert settings.model.threads == threads


def test_threads_from_the_environment_are_clamped() -> None:
    settings, warnings = parse_settings(env_overrides({"LSP_ASSIST_THREADS": "100000"}))
    assert settings.model.threads == min(CPUS, 512)
    assert any("'threads'" in w for w in warnings)


def test_int_keys_are_found() -> None:
    assert {"threads", "contextLength", "batchSize", "gpuLayers", "draftTokens"} <= set(INT_KEYS)


@pytest.mark.parametrize("key", INT_KEYS)
def test_every_integer_setting_has_a_bound(key: str) -> None:
    settings, warnings = parse_settings({key: 10**12})
    value = _value(settings, key)
    assert isinstance(value, int) and 0 <= value <= 2**31 - 1
    assert len(warnings) == 1 and f"'{key}'" in warnings[0]


@pytest.mark.parametrize("key", INT_KEYS)
def test_defaults_are_within_the_bounds(key: str) -> None:
    default = _value(Settings(), key)
    settings, warnings = parse_settings({key: default})
    assert warnings == []
    assert _value(settings, key) == default


@pytest.mark.parametrize("key", ["kvCacheMb", "fileCacheMb"])
def test_cache_sizes_are_bounded_by_the_machines_memory(key: str) -> None:
    settings, warnings = parse_settings({key: 10**9})
    assert _value(settings, key) == psutil.virtual_memory().total // 2**20
    assert "memory" in warnings[0]


def test_long_contexts_of_real_models_are_kept() -> None:
    # Llama 3.1 and Qwen2.5-Coder train 131,072-token contexts
    settings, warnings = parse_settings({"contextLength": 131072, "contextBudget": 32768})
    assert warnings == []
    assert settings.model.context_length == 131072
    clamped, warnings = parse_settings({"contextLength": 10**9, "batchSize": 10**9})
    assert 131072 <= clamped.model.context_length < 10**9
    assert clamped.model.batch_size <= clamped.model.context_length
    assert len(warnings) == 2


def test_huge_timeouts_become_usable_numbers() -> None:
    settings, warnings = parse_settings({"promptTimeoutMs": 10**400, "remoteReadTimeoutMs": 10**30})
    # the engine divides by 1000 to get seconds: 10**400 / 1000 raises OverflowError
    assert settings.model.prompt_timeout_ms / 1000 <= 24 * 3600
    assert settings.model.remote_read_timeout_ms / 1000 <= 24 * 3600
    assert len(warnings) == 2 and "'promptTimeoutMs'" in warnings[0]
    assert len(warnings[0]) < 200


def test_an_unprintable_integer_is_a_warning_not_a_crash() -> None:
    # repr() of an integer with more than 4,300 digits raises ValueError
    settings, warnings = parse_settings({"contextLength": -(10**5000), "maxTokens": 10**5000})
    assert settings.model.context_length == Settings().model.context_length
    assert settings.completion.max_tokens < 2**31
    assert [w.split("'")[1] for w in warnings] == ["contextLength", "maxTokens"]
