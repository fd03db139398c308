-- What the plugin keeps while it runs: the clients, the buffers attached, the ghost text
-- and the items of the answer it came from, the status and the server's stderr. Every
-- module requires this one; none reaches it through require('lsp-assist'), the public
-- face, which re-exports it as `.state`. The records only tests read are records.lua's.

local M = {
  setup = false, -- setup() ran
  builtin = false, -- Neovim's vim.lsp.inline_completion shows the suggestions (use_builtin)
  clients = {}, -- client_id -> { name, initialized, inline, completion, commands }
  attached = {}, -- bufnr -> client_id
  ghost = nil, -- { bufnr, row, col, text, item, index, count, client_id, extmark, tick, typed }
  items = {}, -- normalized items of the last answer shown
  asked_alternatives = nil, -- 'bufnr:tick:row:col' where cycling last asked the server again
  --- The last lines the server wrote on stderr (at most 10), from its start: what the
  --- error state shows after it exited (a usage error, a traceback's end); and the
  --- line it has not finished yet.
  stderr = {},
  stderr_partial = nil,
  --- 'starting' | 'loading' | 'ready' | 'error'; thinking and off are derived.
  status = { state = 'starting', message = nil, latency_ms = nil, server = nil, progress = {} },
  cmd_error = nil, -- why the configured server command cannot run (setup, :checkhealth)
}

return M
