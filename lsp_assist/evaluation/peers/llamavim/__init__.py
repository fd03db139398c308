"""llama.vim's FIM completion client against ``llama-server`` (the replay's ``llamavim`` row):
client.py the client and its defaults; context.py, cache.py, hint.py, ring.py, server.py
its parts. docs/evaluation.md.
"""
