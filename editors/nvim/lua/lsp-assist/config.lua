-- The plugin's options: their defaults (require('lsp-assist').defaults), the options
-- setup() resolved (`current`, which require('lsp-assist').config reads and writes), and
-- whether they let suggestions show in a buffer.

local M = {}

local api = vim.api

---@class lsp_assist.Config
M.defaults = {
  --- Command that starts the server on stdio. nil: `lsp-assist serve` from PATH, else
  --- the one `make` installed in this repository's .venv.
  cmd = nil,
  --- Server settings, flat camelCase keys (docs/configuration.md), sent as
  --- initializationOptions and as workspace/didChangeConfiguration.
  settings = {},
  filetypes = {
    'python', 'javascript', 'javascriptreact', 'typescript', 'typescriptreact',
    'go', 'rust', 'java', 'c', 'cpp',
  },
  --- Filetypes attached but not suggested in (:LspAssistEnable {filetype} turns one on).
  disabled_filetypes = {},
  --- false: no suggestions anywhere until :LspAssistEnable.
  enabled = true,
  root_markers = { '.git', 'pyproject.toml', 'setup.py', 'package.json', 'go.mod', 'Cargo.toml', 'pom.xml', 'Makefile' },
  --- Pause after the last keystroke or cursor move before asking (the server debounces too).
  debounce_ms = 75,
  --- Insert-mode keys (false: no mapping). Without a suggestion on screen, the accept,
  --- word, line and dismiss keys do what they do without the plugin.
  keys = {
    accept = '<Tab>',
    accept_word = '<M-Right>',
    accept_line = '<M-C-Right>',
    dismiss = '<C-]>',
    trigger = '<M-\\>',
    next = '<M-]>',
    prev = '<M-[>',
  },
  --- Old name of keys.accept (still honoured when set).
  accept_key = nil,
  --- Ask on InsertEnter and on CursorMovedI, not only after a text change.
  trigger_on_insert_enter = true,
  trigger_on_cursor_moved = true,
  --- Milliseconds the cursor rests in Normal mode (after a move, or on entering a buffer)
  --- before the plugin tells the server where it is (lspAssist/didMoveCursor): the server
  --- then evaluates the prompt there, so the first suggestion where the user starts to
  --- type needs no cold prompt. 0 or false: never.
  report_cursor_ms = 300,
  --- Milliseconds between lspAssist.status polls while the model loads (0: no polling).
  status_poll_ms = 1000,
  --- Use Neovim's own vim.lsp.inline_completion (0.12+) instead of the plugin's ghost
  --- text: <Tab> accepts, but none of the other keys, the status or enable/disable apply.
  use_builtin = false,
  --- 'auto': textDocument/inlineCompletion when the server offers it, else the
  --- textDocument/completion fallback; 'completion': always the fallback.
  method = 'auto',
  --- Extra fields merged into the vim.lsp.config / vim.lsp.start table.
  lsp = {},
  --- Next edits (lua/lsp-assist/next_edit.lua: key, dismiss, debounce_ms; false: off).
  next_edit = {},
  --- Keep the records only tests read (requests, answers, notices, telemetry,
  --- acceptances, errors; next_edit's too): records.lua.
  debug_records = false,
}

--- The options now: the defaults until setup(), then what it resolved.
M.current = vim.deepcopy(M.defaults)

--- Whether suggestions are on for `bufnr` (globally, for its filetype, for the buffer).
function M.enabled(bufnr)
  bufnr = (bufnr == nil or bufnr == 0) and api.nvim_get_current_buf() or bufnr
  if not M.current.enabled then
    return false
  end
  if not api.nvim_buf_is_valid(bufnr) then
    return false
  end
  if vim.tbl_contains(M.current.disabled_filetypes, vim.bo[bufnr].filetype) then
    return false
  end
  return vim.b[bufnr].lsp_assist_enabled ~= false
end

return M
