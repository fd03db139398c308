"""The peers: other completion tools, run on the same model so a row can compare with them.

llamavim/ is llama.vim's client reimplemented against llama.cpp's ``llama-server``
(client.py, with its prompt, cache, hint, ring and server by concept); llmls.py is
llm.nvim on llm-ls against llama-cpp-python's server; both are replay suggesters
(suggester.py). llmls_row.py is the bench's ``peer`` row: llm-ls's prompt window sent to
that server, task by task. docs/evaluation.md.
"""
