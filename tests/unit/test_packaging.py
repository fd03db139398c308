"""pyproject.toml's package list and package data cover the source tree (the wheel's contents)."""

from __future__ import annotations

import tomllib
from pathlib import Path

from setuptools import find_packages

from lsp_assist.index import languages

ROOT = Path(__file__).resolve().parents[2]
CONFIG = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]


def test_every_package_of_the_tree_is_listed() -> None:
    listed = set(CONFIG["packages"])
    mapped = set(CONFIG["package-dir"])
    assert listed - mapped == set(find_packages(str(ROOT), include=["lsp_assist*"]))


def test_package_data_takes_every_query_file() -> None:
    grammars = ROOT / CONFIG["package-dir"]["lsp_assist.grammars"]
    patterns = CONFIG["package-data"]["lsp_assist.grammars"]
    files = {p for p in grammars.rglob("*") if p.is_file()}
    # setuptools globs each pattern from the package folder
    taken = {p for pattern in patterns for p in grammars.glob(pattern)}
    assert files
    assert files - taken == set()


def test_checkout_reads_the_top_level_grammars() -> None:
    # an editable install: setuptools' finder does not serve lsp_assist.grammars
    assert Path(str(languages.GRAMMARS_DIR)) == ROOT / "grammars"
    assert languages.available_languages()
