"""The whole suite's plugins: the skip check (tests/support/skip_check.py) and pytester.

A test that skips fails unless ``LSP_ASSIST_SKIP`` names the part it needs (the GPU tests
on a machine without a GPU excepted), and the run ends by listing what it left out.
pytester runs small suites of their own for tests/unit/test_skips.py.
"""

pytest_plugins = ["pytester", "tests.support.skip_check"]
