"""One language table: every alias means the same language to each stage that reads one.

``documents.canonical_language`` is the one alias table (editor ids such as
``typescriptreact``, short names such as ``py``); the context engine's parsers, the stop
strings and post-processing's quotes and comments all go through it, so an alias and
its language get the same treatment everywhere (three tables disagreed before: ``jsx``
had a parser but no stop strings, ``py`` quotes but no parser).
"""

from __future__ import annotations

import pytest

from lsp_assist.context.syntax import get_parser
from lsp_assist.documents import Document, canonical_language
from lsp_assist.documents.document import EXTENSION_LANGUAGES, LANGUAGE_ALIASES
from lsp_assist.serving import postprocess
from lsp_assist.serving.stoprules import stop_strings


@pytest.mark.parametrize(("alias", "language"), sorted(LANGUAGE_ALIASES.items()))
def test_an_alias_is_its_language_in_every_stage(alias: str, language: str) -> None:
    assert canonical_language(alias) == language
    assert stop_strings(alias) == stop_strings(language)
    assert (get_parser(alias) is None) == (get_parser(language) is None)
    assert postprocess._quotes(alias) == postprocess._quotes(language)
    assert postprocess._comment(alias) == postprocess._comment(language)


def test_the_aliases_name_languages_the_index_knows() -> None:
    known = set(EXTENSION_LANGUAGES.values())
    assert set(LANGUAGE_ALIASES.values()) <= known
    assert not set(LANGUAGE_ALIASES) & known  # an alias is never itself a language id
    for language in known:
        assert canonical_language(language) == language
    assert canonical_language("lua") == "lua"  # unknown ids pass through


def test_a_document_keeps_the_canonical_id() -> None:
    # the file name wins; without a known suffix the editor's id is made canonical
    assert Document("file:///w/a.tsx", "", language_id="typescriptreact").language_id == "tsx"
    assert Document("file:///w/Makefile", "", language_id="golang").language_id == "go"
    assert Document("file:///w/notes", "", language_id="lua").language_id == "lua"
    snapshot = Document("file:///w/view", "", language_id="javascriptreact").snapshot()
    assert snapshot.language_id == "javascript"
