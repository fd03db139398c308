"""What the editor tests share: drivers of the real editors and of what they leave behind.

- ``project``: the checkout's paths, the two-file project the tests open, the server's
  test settings and environment.
- ``tmux``: :class:`~tests.editors.support.tmux.Screen`, the one tmux screen (an editor
  in a terminal of its own: keys in, the screen and its colours out).
- ``nvim``: headless Neovim runs and the plugin's install snippet in tmux.
- ``emacs``: lsp-assist.el's install snippet from docs/editors.md and ``emacs -nw`` in tmux.
- ``code_server``: real VS Code (code-server in headless Chromium) and its driver.
- ``vscode_client``: the extension's client libraries in node (drive-server.mjs).
- ``metrics``: the server's metrics log and log after a session.
- ``next_edit_source``: the file the next-edit tests rename in.

Test modules import these, never each other (tests/unit/test_architecture.py checks it).
"""
