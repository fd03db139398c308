"""The infill benchmarks: HumanEval infilling (``bench --humaneval``) and SAFIM
(``bench --safim``), each task a program with a part blanked, answered by the model alone
and through the server.

humaneval.py, humaneval_sets.py and humaneval_chain.py are HumanEval's tasks, sets,
scores and the chained arm, humaneval_run.py runs them; safim.py and safim_run.py are
SAFIM's. What both run with is harness.py (the plain model, the scratch server, one
inline request, the run's meta) and sandbox.py (where an answered program runs).
docs/evaluation.md.
"""
