"""The acceptance replay (``bench --replay``) and the cross-file lines (``bench --crossfile``):
a simulated user typing real code, served as an editor serves it.

run.py is the replay's runner (rows, paces, reaction times), tasks.py its regions and
keys, user.py the user who reads, takes or types over a suggestion, client.py the
lsp-assist server as the Neovim plugin drives it, oracle.py the ceiling without a model,
report.py the figures, table and plot. crossfile.py and crossfile_run.py serve one line
at its start with the replay's user, tasks and plain row. docs/evaluation.md.
"""
