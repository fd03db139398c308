"""The benchmark scripts, each run on its own: ``.venv/bin/python benchmarks/NAME.py``.

They measure with the real model and are never collected by pytest (docs/testing.md,
docs/performance.md). A package so that a test can import a script's model-free core
(``benchmarks.soak``, ``benchmarks.gen_tree``, ``benchmarks.bench_prefix_sharing``); a
script adds the checkout to ``sys.path`` itself, so it runs from anywhere.
"""
