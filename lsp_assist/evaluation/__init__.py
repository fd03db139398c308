"""Evaluation: ``lsp-assist bench`` and ``lsp-assist eval`` on real code, through the server.

The shared floor is here: tasks.py chooses the lines to complete (seeded, target removed
from everything the server sees); client.py drives ``lsp-assist serve`` over stdio as an
editor does; workspace.py copies and indexes the workspace; rows.py says what each row
is; server_row.py runs a row through the server; runner.py is the two commands;
metrics.py scores suggestions and summarises rows; report.py writes the table, the JSON
records and the plots; progress.py the progress bar; suggester.py the interface a
replay's client implements. The rooms, one family each: infill/ (HumanEval and SAFIM,
on one harness and sandbox), replay/ (the acceptance replay and the cross-file lines),
peers/ (llama.vim, llm-ls and the bench's peer row). tasks.py, metrics.py and
peers/llmls_row.py's prompt builder hold no pygls. The second quantization of
``--model2 TYPE`` is backends/quantize.py's. docs/evaluation.md.
"""
