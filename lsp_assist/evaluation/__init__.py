"""Evaluation: ``lsp-assist bench`` and ``lsp-assist eval`` on real code, through the server.

tasks.py chooses the lines to complete (seeded, target removed from everything the
server sees); client.py drives ``lsp-assist serve`` over stdio as an editor does;
workspace.py copies and indexes the workspace; rows.py says what each row is;
server_row.py runs a row through the server, peer.py the peer's prompt sent to
llama-cpp-python's OpenAI-compatible server; runner.py is the two commands; metrics.py
scores suggestions and summarises rows; report.py writes the table, the JSON records and the plots.
The second quantization of ``--model2 TYPE`` is backends/quantize.py's.
tasks.py, metrics.py and peer.py's prompt builder hold no pygls. docs/evaluation.md.
"""
