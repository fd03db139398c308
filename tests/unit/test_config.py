"""Settings parsing: defaults, coercion, warnings for invalid values, env, docs in step."""

from __future__ import annotations

from pathlib import Path

from lsp_assist.config import SETTING_KEYS, Settings, env_overrides, parse_settings


def test_defaults_without_values() -> None:
    settings, warnings = parse_settings(None)
    assert warnings == []
    assert settings == Settings()
    assert settings.context.context_budget == 1024
    assert (settings.model.draft, settings.model.batch_invariant) == ("off", False)
    assert settings.model.model == "coder-0.5b"


def test_valid_values_are_coerced() -> None:
    settings, warnings = parse_settings(
        {"contextBudget": "2048", "draft": "auto", "watch": "false", "denyGlobs": "a/*,b/*"}
    )
    assert warnings == []
    assert settings.context.context_budget == 2048
    assert settings.model.draft == "auto"
    assert settings.index.watch is False
    assert settings.index.deny_globs == ["a/*", "b/*"]


def test_invalid_value_warns_naming_key_and_keeps_default() -> None:
    settings, warnings = parse_settings({"contextBudget": -5, "draft": "maybe", "threads": "x"})
    assert settings.context.context_budget == 1024
    assert settings.model.draft == "off"
    assert settings.model.model == "coder-0.5b"
    assert settings.model.threads == 0
    assert len(warnings) == 3
    assert any("contextBudget" in w for w in warnings)
    assert any("draft" in w for w in warnings)


def test_unknown_key_warns() -> None:
    _, warnings = parse_settings({"noSuchSetting": 1})
    assert warnings == ["unknown setting 'noSuchSetting' ignored"]


def test_non_object_settings() -> None:
    settings, warnings = parse_settings(["not", "a", "dict"])  # type: ignore[arg-type]
    assert settings == Settings()
    assert warnings


def test_ratios_over_one_fall_back() -> None:
    settings, warnings = parse_settings({"editingZoneRatio": 0.9, "relatedRatio": 0.9})
    assert any("ratios" in w for w in warnings)
    assert settings.context.editing_zone_ratio == 0.4


def test_replace_keeps_previous_values() -> None:
    first, _ = parse_settings({"contextBudget": 2000})
    second, warnings = first.replace({"maxTokens": 10})
    assert warnings == []
    assert second.context.context_budget == 2000
    assert second.completion.max_tokens == 10
    assert first.completion.max_tokens == 48


def test_nested_lsp_assist_section() -> None:
    settings, warnings = parse_settings({"lspAssist": {"maxLines": 3}})
    assert warnings == []
    assert settings.completion.max_lines == 3


def test_env_overrides() -> None:
    found = env_overrides({"LSP_ASSIST_MODEL_PATH": "/m.gguf", "OTHER": "x"})
    assert found == {"modelPath": "/m.gguf"}


def test_every_setting_is_documented() -> None:
    doc = (Path(__file__).parents[2] / "docs" / "configuration.md").read_text()
    missing = [key for key in SETTING_KEYS if f"`{key}`" not in doc]
    assert missing == []
