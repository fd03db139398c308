-- lsp-assist for Neovim: starts `lsp-assist serve` with the built-in LSP client and shows
-- its suggestions as ghost text.
--
--   require('lsp-assist').setup({
--     settings = { modelPath = '/models/qwen2.5-coder-1.5b-q4_k_m.gguf', draft = 'prompt-lookup' },
--   })
--
-- The plugin sends textDocument/inlineCompletion when insert mode starts, after a short
-- pause in typing and when the cursor moves in insert mode (debounced), draws the first
-- item as virtual text (an extmark), and its insert-mode keys accept all of it, a word
-- or a line, dismiss it, ask now, or cycle through the items of the answer (the keys of
-- copilot.vim). Accepting reports the acceptance (workspace/executeCommand
-- lspAssist.accept). When the server does not offer inline completion it falls back to
-- textDocument/completion and shows the item's textEdit the same way. Neovim 0.12's
-- vim.lsp.inline_completion is used instead only with `use_builtin = true`.
--
-- Early answers: the client sets capabilities.experimental.lspAssistSuggestionReady, so
-- a server that answered with the start of a suggestion (answerAfterMs) sends
-- lspAssist/suggestionReady once the whole of it is in its cache; if that suggestion is
-- still on screen here (the user stopped, or typed into it) and no request is out, the
-- plugin asks again at the cursor (answered from the cache) and shows the longer text.
--
-- require('lsp-assist').state holds what the plugin saw (clients, last request and
-- response, the ghost text, acceptances, the status): the headless tests read it.

local M = {}

local api = vim.api
local uv = vim.uv or vim.loop

local NAME = 'lsp_assist'
local INLINE = 'textDocument/inlineCompletion'
local COMPLETION = 'textDocument/completion'
local READY = 'lspAssist/suggestionReady'
local READY_CAPABILITY = 'lspAssistSuggestionReady'
local REQUEST_CANCELLED = -32800
local RESTART_HINT = ':LspAssistRestart'
local ns = api.nvim_create_namespace('lsp-assist.ghost')

--- The repository this plugin lives in (editors/nvim/lua/lsp-assist/init.lua).
local function repo_root()
  local source = debug.getinfo(1, 'S').source:gsub('^@', '')
  return vim.fn.fnamemodify(source, ':p:h:h:h:h:h')
end

--- The server `make` installs in the repository's virtual environment.
function M.venv_server()
  local path = repo_root() .. '/.venv/bin/lsp-assist'
  if vim.fn.executable(path) == 1 then
    return path
  end
  return nil
end

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
}

M.config = vim.deepcopy(M.defaults)

--- What the plugin saw; read by tests and the statusline.
M.state = {
  setup = false,
  builtin = false,
  clients = {}, -- client_id -> { name, initialized, inline, completion, commands }
  attached = {}, -- bufnr -> client_id
  requests = 0,
  responses = 0,
  last_request = nil, -- { method, params, bufnr, invoked }
  last_response = nil, -- { method, err, result, items, stale, ms }
  ghost = nil, -- { bufnr, row, col, text, item, index, count, extmark }
  items = {}, -- normalized items of the last answer shown
  accepted = {}, -- { item, inserted, command, response = { err, result } }
  partial = {}, -- { kind, inserted }
  history = {}, -- the last 50 answers: { invoked, stale, items, err }
  --- lspAssist/suggestionReady notices (the last 50): { uri, position, version, action }
  --- where action is 'refresh' or why it was ignored; refreshes (the last 50): the
  --- answers to the requests they made, { before, after, same, ms }.
  ready = {},
  refreshes = {},
  --- Characters typed that matched the ghost (it was updated in place), and the
  --- answers to the requests made after them: { before, after, same, ms } (the last 50).
  typed_through = 0,
  typed_answers = {},
  --- The telemetry notifications sent (the last 50): { method, item (its id),
  --- accepted_length } for textDocument/didShowCompletion,
  --- textDocument/didPartiallyAcceptCompletion and lspAssist/didDismissCompletion.
  telemetry = {},
  --- Cursor positions reported with lspAssist/didMoveCursor (the last 50): { bufnr, line,
  --- character }.
  cursor_reports = {},
  errors = {},
  --- The last lines the server wrote on stderr (at most STDERR_LINES), from its start:
  --- what the error state shows after it exited (a usage error, a traceback's end).
  stderr = {},
  --- 'starting' | 'loading' | 'ready' | 'error'; thinking and off are derived.
  status = { state = 'starting', message = nil, latency_ms = nil, server = nil, progress = {} },
}

local function has(version)
  return vim.fn.has('nvim-' .. version) == 1
end

local function record_error(where, err)
  table.insert(M.state.errors, { where = where, err = err })
end

--- Call a client method with the 0.11+ colon syntax, or the 0.10 dot syntax.
local function client_request(client, method, params, handler, bufnr)
  if has('0.11') then
    return client:request(method, params, handler, bufnr)
  end
  return client.request(method, params, handler, bufnr)
end

local function client_supports(client, method)
  if has('0.11') then
    return client:supports_method(method)
  end
  return client.supports_method(method)
end

--- Call a client method: Neovim 0.11 made them methods (client:notify), 0.10 has fields.
local function client_call(client, name, ...)
  if has('0.11') then
    return client[name](client, ...)
  end
  return client[name](...)
end

--- The warning for a command that found no server: in the error state, why and how to
--- start it again.
local function no_server(text)
  local status = M.state.status
  if status.state == 'error' and status.message then
    local hint = status.message:find(RESTART_HINT, 1, true) and '' or ('; ' .. RESTART_HINT .. ' starts it again')
    text = ('%s: %s%s'):format(text, status.message, hint)
    local said = M.state.stderr[#M.state.stderr]
    if said then
      text = ('%s (its stderr: %s)'):format(text, said)
    end
  end
  vim.notify('lsp-assist: ' .. text, vim.log.levels.WARN)
end

local STDERR_LINES = 10

--- Keep the last lines of the server's stderr. Neovim writes a server's stderr only to
--- the LSP log (`vim.lsp.log.error('rpc', cmd, 'stderr', chunk)`), so the plugin wraps
--- that function once and keeps the chunks of its own command (the log still gets them).
local function capture_stderr()
  local ok, log = pcall(require, 'vim.lsp.log')
  if not ok or type(log) ~= 'table' or type(log.error) ~= 'function' or log._lsp_assist then
    return
  end
  local original = log.error
  log._lsp_assist = true
  log.error = function(...)
    local where, cmd, kind, chunk = ...
    local ours = M.config.resolved_cmd and M.config.resolved_cmd[1]
    if type(cmd) == 'table' then
      cmd = cmd[1] -- Neovim 0.10 logs the whole command
    end
    if where == 'rpc' and kind == 'stderr' and type(chunk) == 'string' and ours and cmd == ours then
      local lines = M.state.stderr
      local partial = M.state.stderr_partial or ''
      local parts = vim.split(partial .. chunk, '\n', { plain = true })
      M.state.stderr_partial = table.remove(parts)
      for _, line in ipairs(parts) do
        line = line:gsub('%s+$', '')
        if line ~= '' then
          table.insert(lines, #line > 300 and line:sub(1, 300) .. '...' or line)
          if #lines > STDERR_LINES then
            table.remove(lines, 1)
          end
        end
      end
    end
    return original(...)
  end
end

--- The server's last stderr lines, with a line it left unfinished.
local function stderr_tail()
  local lines = vim.list_extend({}, M.state.stderr)
  local partial = vim.trim(M.state.stderr_partial or '')
  if partial ~= '' then
    table.insert(lines, partial)
  end
  return lines
end
M.stderr_tail = stderr_tail

local function get_client(bufnr)
  local id = M.state.attached[bufnr]
  if not id then
    return nil
  end
  return vim.lsp.get_client_by_id(id)
end

local function any_client()
  return vim.lsp.get_clients({ name = NAME })[1]
end

-- Status -------------------------------------------------------------------------------

local pending = {} -- bufnr -> { client_id, request_id, sent }

local function status_changed()
  vim.schedule(function()
    pcall(api.nvim_exec_autocmds, 'User', { pattern = 'LspAssistStatus', modeline = false })
    pcall(vim.cmd, 'redrawstatus')
  end)
end

local schedule_cursor_report -- defined with on_attach; set_status calls it when ready

local function set_status(state, message)
  local status = M.state.status
  if status.state ~= state or status.message ~= message then
    local was = status.state
    status.state, status.message = state, message
    status_changed()
    if state == 'ready' and was ~= 'ready' and schedule_cursor_report then
      schedule_cursor_report(api.nvim_get_current_buf()) -- the model came: where is the cursor?
    end
  end
end

--- Read an lspAssist.status result: ready, loading, or the model's error.
local function apply_server_status(result)
  if type(result) ~= 'table' then
    return
  end
  M.state.status.server = result
  local model = type(result.model) == 'table' and result.model or {}
  local model_error = model.error
  if model_error ~= nil and model_error ~= vim.NIL and model_error ~= '' then
    set_status('error', tostring(model_error))
  elseif result.ready == true or (result.ready == nil and result.initialized == true) then
    set_status('ready', nil)
  elseif result.initialized == false or result.ready == false then
    set_status('loading', nil)
  end
end

local poll_timer

local function stop_polling()
  if poll_timer then
    poll_timer:stop()
    poll_timer:close()
    poll_timer = nil
  end
end

--- Ask lspAssist.status now, then every status_poll_ms until ready or error.
local function poll_status()
  local client = any_client()
  if not client or M.config.status_poll_ms <= 0 then
    return
  end
  client_request(client, 'workspace/executeCommand', { command = 'lspAssist.status', arguments = {} },
    function(err, result)
      if err then
        return
      end
      apply_server_status(result)
      local state = M.state.status.state
      if (state == 'loading' or state == 'starting') and not poll_timer then
        poll_timer = uv.new_timer()
        poll_timer:start(M.config.status_poll_ms, 0, vim.schedule_wrap(function()
          stop_polling()
          poll_status()
        end))
      end
    end, nil)
end

--- $/progress from the server (LspProgress): model loading, indexing.
local function on_progress(params)
  if type(params) ~= 'table' or params.value == nil then
    return
  end
  local value = params.value
  local token = tostring(params.token)
  local progress = M.state.status.progress
  if value.kind == 'end' then
    progress[token] = nil
    poll_status() -- a load that ended: ready, or failed
  else
    local entry = progress[token] or {}
    entry.title = value.title or entry.title
    entry.message = value.message or entry.message
    entry.percentage = value.percentage or entry.percentage
    progress[token] = entry
    local title = (entry.title or '') .. ' ' .. token
    if value.kind == 'begin' and title:lower():find('model') then
      set_status('loading', nil)
    end
  end
  status_changed()
end

local function progress_text()
  local parts = {}
  for _, entry in pairs(M.state.status.progress) do
    local title = (entry.title or ''):gsub('^lsp%-assist:%s*', '')
    local text = title
    if entry.message and entry.message ~= '' then
      text = text .. ' ' .. entry.message
    end
    if entry.percentage then
      text = text .. (' %d%%'):format(entry.percentage)
    end
    table.insert(parts, vim.trim(text))
  end
  table.sort(parts)
  return table.concat(parts, ', ')
end

--- The plugin's state for the current buffer: off, starting, loading, ready, thinking, error.
function M.status_info(bufnr)
  bufnr = (bufnr == nil or bufnr == 0) and api.nvim_get_current_buf() or bufnr
  local status = M.state.status
  local state = status.state
  if not M.state.setup then
    state = 'off'
  elseif not M.is_enabled(bufnr) then
    state = 'off'
  elseif pending[bufnr] and state == 'ready' then
    state = 'thinking'
  end
  local ghost = M.state.ghost
  return {
    state = state,
    message = status.message,
    latency_ms = status.latency_ms,
    progress = progress_text(),
    attached = M.state.attached[bufnr] ~= nil,
    stderr = state == 'error' and stderr_tail() or nil,
    item = ghost and ghost.bufnr == bufnr and ghost.count > 1 and { ghost.index, ghost.count } or nil,
  }
end

--- Statusline component: "lsp-assist: ready 120 ms", "lsp-assist: loading", ...
--- Empty in buffers the server is not attached to.
function M.statusline()
  local info = M.status_info(0)
  if not info.attached and info.state ~= 'error' then
    return ''
  end
  local text = 'lsp-assist: ' .. info.state
  if info.state == 'ready' and info.latency_ms then
    text = text .. (' %d ms'):format(info.latency_ms)
  end
  if info.item then
    text = text .. (' %d/%d'):format(info.item[1], info.item[2])
  end
  if info.progress ~= '' then
    text = text .. ' (' .. info.progress .. ')'
  end
  if info.state == 'error' and info.message then
    text = text .. ': ' .. info.message:sub(1, 60)
  end
  return text
end

-- Enable / disable ---------------------------------------------------------------------

--- Whether suggestions are on for `bufnr` (globally, for its filetype, for the buffer).
function M.is_enabled(bufnr)
  bufnr = (bufnr == nil or bufnr == 0) and api.nvim_get_current_buf() or bufnr
  if not M.config.enabled then
    return false
  end
  if not api.nvim_buf_is_valid(bufnr) then
    return false
  end
  if vim.tbl_contains(M.config.disabled_filetypes, vim.bo[bufnr].filetype) then
    return false
  end
  return vim.b[bufnr].lsp_assist_enabled ~= false
end

local function cancel_pending(bufnr)
  local previous = pending[bufnr]
  if previous then
    local client = vim.lsp.get_client_by_id(previous.client_id)
    if client then
      client_call(client, 'cancel_request', previous.request_id)
    end
    pending[bufnr] = nil
  end
end

local function builtin_enable(bufnr)
  if M.state.builtin and vim.lsp.inline_completion then
    vim.lsp.inline_completion.enable(M.is_enabled(bufnr), { bufnr = bufnr })
  end
end

local function refresh_enabled()
  for bufnr in pairs(M.state.attached) do
    if api.nvim_buf_is_valid(bufnr) then
      if not M.is_enabled(bufnr) then
        M.clear(bufnr)
        cancel_pending(bufnr)
      end
      builtin_enable(bufnr)
    end
  end
  status_changed()
end

--- Turn suggestions on everywhere, or for one filetype.
function M.enable(filetype)
  if filetype and filetype ~= '' then
    M.config.disabled_filetypes = vim.tbl_filter(function(ft)
      return ft ~= filetype
    end, M.config.disabled_filetypes)
  else
    M.config.enabled = true
  end
  refresh_enabled()
end

--- Turn suggestions off everywhere, or for one filetype.
function M.disable(filetype)
  if filetype and filetype ~= '' then
    if not vim.tbl_contains(M.config.disabled_filetypes, filetype) then
      table.insert(M.config.disabled_filetypes, filetype)
    end
  else
    M.config.enabled = false
  end
  refresh_enabled()
end

--- Turn suggestions off or back on for one buffer.
function M.toggle(bufnr)
  bufnr = (bufnr == nil or bufnr == 0) and api.nvim_get_current_buf() or bufnr
  vim.b[bufnr].lsp_assist_enabled = not (vim.b[bufnr].lsp_assist_enabled ~= false)
  refresh_enabled()
  return vim.b[bufnr].lsp_assist_enabled
end

-- Ghost text ---------------------------------------------------------------------------

function M.clear(bufnr)
  local ghost = M.state.ghost
  if ghost and (bufnr == nil or ghost.bufnr == bufnr) then
    pcall(api.nvim_buf_del_extmark, ghost.bufnr, ns, ghost.extmark)
    M.state.ghost = nil
    status_changed()
  end
end

--- Byte column of an LSP position on its line.
local function byte_col(bufnr, position, encoding)
  local line = api.nvim_buf_get_lines(bufnr, position.line, position.line + 1, false)[1] or ''
  local util = vim.lsp.util
  if util._get_line_byte_from_position then
    local ok, col = pcall(util._get_line_byte_from_position, bufnr, position, encoding)
    if ok then
      return col
    end
  end
  if encoding == 'utf-8' then
    return math.min(position.character, #line)
  end
  local ok, col = pcall(vim.str_byteindex, line, encoding or 'utf-16', position.character, false)
  if ok and type(col) == 'number' then
    return col
  end
  return math.min(position.character, #line)
end

local function snippet_text(value)
  -- Keep placeholder text, drop tab stops: ${1:foo} -> foo, $1 / ${0} -> ''.
  local text = value:gsub('%${%d+:([^}]*)}', '%1'):gsub('%${%d+}', ''):gsub('%$%d+', '')
  return text
end

--- Normalize inline items or completion items into { text, range, command }.
local function normalize(method, result)
  local items = {}
  if not result then
    return items
  end
  local raw_items = result.items or result
  if type(raw_items) ~= 'table' then
    return items
  end
  for _, raw in ipairs(raw_items) do
    if method == INLINE then
      local text = raw.insertText
      if type(text) == 'table' then
        text = snippet_text(text.value or '')
      end
      if type(text) == 'string' then
        table.insert(items, { text = text, range = raw.range, command = raw.command })
      end
    else
      local edit = raw.textEdit
      local text, range
      if edit then
        text = edit.newText
        range = edit.range or edit.insert
      else
        text = raw.insertText or raw.label
      end
      if raw.insertTextFormat == 2 and text then
        text = snippet_text(text)
      end
      if type(text) == 'string' and text ~= '' then
        table.insert(items, { text = text, range = range, command = raw.command, label = raw.label })
      end
    end
  end
  return items
end

--- The part of `item` still to insert at the cursor (nil: it does not fit here).
local function remaining_text(bufnr, client, item)
  local cursor = api.nvim_win_get_cursor(0)
  local row, col = cursor[1] - 1, cursor[2]
  local text = item.text
  if item.range then
    local start_row = item.range.start.line
    local start_col = byte_col(bufnr, item.range.start, client.offset_encoding)
    if start_row ~= row or start_col > col then
      return nil
    end
    if start_col < col then
      -- The item replaces text typed since its range start: show only the rest.
      local line = api.nvim_buf_get_lines(bufnr, row, row + 1, false)[1] or ''
      local typed = line:sub(start_col + 1, col)
      if text:sub(1, #typed) ~= typed then
        return nil
      end
      text = text:sub(#typed + 1)
    end
  end
  if text == '' then
    return nil
  end
  return text
end

--- The extmark options that show `text` as ghost text.
local function ghost_opts(text)
  local lines = vim.split(text, '\n', { plain = true })
  local virt_lines = {}
  for i = 2, #lines do
    table.insert(virt_lines, { { lines[i], 'LspAssistGhost' } })
  end
  local opts = {
    virt_text = { { lines[1], 'LspAssistGhost' } },
    virt_text_pos = has('0.10') and 'inline' or 'overlay',
    hl_mode = 'replace',
  }
  if #virt_lines > 0 then
    opts.virt_lines = virt_lines
  end
  return opts
end

--- Length of `text` in UTF-16 code units (what Copilot's acceptedLength counts).
local function utf16_len(text)
  local ok, n = pcall(vim.str_utfindex, text, 'utf-16')
  if ok and type(n) == 'number' then
    return n
  end
  local _, units = vim.str_utfindex(text) -- 0.10 and older: (utf-32, utf-16)
  return units
end

--- The item as the server sent it (Copilot's clients send it back in their telemetry).
local function wire_item(item)
  return { insertText = item.text, range = item.range, command = item.command }
end

--- Tell the server about `item` (its telemetry: shown, partly accepted, dismissed).
local function tell(client_id, method, item, params)
  local client = vim.lsp.get_client_by_id(client_id)
  if not client or not item or not item.command then
    return
  end
  params = params or {}
  local log = M.state.telemetry
  local args = item.command.arguments or {}
  table.insert(log, { method = method, item = args[1] or vim.NIL, accepted_length = params.acceptedLength or vim.NIL })
  if #log > 50 then
    table.remove(log, 1)
  end
  local ok, err = pcall(client_call, client, 'notify', method, params)
  if not ok then
    record_error(method, err)
  end
end

local shown_item -- the item last reported as shown (a redraw of its rest is not a show)

--- Draw `text` (of `item`, number `index` of `count`) as ghost text at the cursor.
local function draw(bufnr, client_id, item, text, index, count)
  M.clear()
  local cursor = api.nvim_win_get_cursor(0)
  local row, col = cursor[1] - 1, cursor[2]
  local ok, extmark = pcall(api.nvim_buf_set_extmark, bufnr, ns, row, col, ghost_opts(text))
  if not ok then
    record_error('extmark', extmark)
    return false
  end
  M.state.ghost = {
    bufnr = bufnr,
    row = row,
    col = col,
    text = text,
    item = item,
    index = index,
    count = count,
    client_id = client_id,
    extmark = extmark,
    tick = api.nvim_buf_get_changedtick(bufnr),
  }
  if shown_item ~= item then
    shown_item = item
    tell(client_id, 'textDocument/didShowCompletion', item, { item = wire_item(item) })
  end
  status_changed()
  return true
end

--- Show item `index` of `items` at the cursor; false when it does not fit there.
local function show(bufnr, client, items, index)
  local item = items[index]
  local text = item and remaining_text(bufnr, client, item)
  if not text then
    return false
  end
  M.state.items = items
  return draw(bufnr, client.id, item, text, index, #items)
end

-- Requests -----------------------------------------------------------------------------

local timers = {} -- bufnr -> uv timer

--- Ask the server for a suggestion at the cursor. `invoked`: the user asked explicitly.
--- `opts.step`: when the answer comes, show the item `step` places after the shown one
--- (cycling), wrapping around. `opts.refresh`: ask even though a suggestion shows here
--- (lspAssist/suggestionReady), and keep the shown one unless the answer differs.
function M.request(bufnr, invoked, opts)
  opts = opts or {}
  bufnr = (bufnr == nil or bufnr == 0) and api.nvim_get_current_buf() or bufnr
  local client = get_client(bufnr)
  if not client or not M.is_enabled(bufnr) then
    return false
  end
  local inline = M.config.method ~= 'completion' and client_supports(client, INLINE)
  local method = inline and INLINE or COMPLETION
  local params = vim.lsp.util.make_position_params(0, client.offset_encoding)
  if inline then
    params.context = { triggerKind = invoked and 1 or 2 } -- Invoked / Automatic
  else
    params.context = { triggerKind = 1 }
  end
  local tick = api.nvim_buf_get_changedtick(bufnr)
  local cursor = api.nvim_win_get_cursor(0)
  local here = { tick, cursor[1], cursor[2] }
  -- Typed into the ghost: ask (the server's type-through cache answers), but keep what
  -- shows unless the answer differs.
  local keep = opts.refresh
  if not invoked and not opts.step and not opts.refresh then
    -- Nothing new to ask: a request for this text and place is out (an explicit one,
    -- maybe), or its suggestion is on screen.
    local out = pending[bufnr]
    local ghost = M.state.ghost
    if out and vim.deep_equal(out.here, here) then
      return true
    end
    if ghost and ghost.bufnr == bufnr and ghost.tick == tick
      and ghost.row == cursor[1] - 1 and ghost.col == cursor[2] then
      if not ghost.typed then
        return true
      end
      ghost.typed = false -- asked once for this place
      keep = true
    end
  end
  cancel_pending(bufnr)
  local shown = M.state.ghost and M.state.ghost.bufnr == bufnr and M.state.ghost.index or 1
  M.state.requests = M.state.requests + 1
  M.state.last_request = { method = method, params = params, bufnr = bufnr, invoked = invoked == true }
  local sent = uv.hrtime()
  local ok, request_id
  ok, request_id = client_request(client, method, params, function(err, result)
    if pending[bufnr] and pending[bufnr].request_id == request_id then
      pending[bufnr] = nil
    end
    local ms = (uv.hrtime() - sent) / 1e6
    local items = err and {} or normalize(method, result)
    local now = api.nvim_buf_is_valid(bufnr) and api.nvim_get_current_buf() == bufnr
    local stale = not now
      or api.nvim_buf_get_changedtick(bufnr) ~= tick
      or not vim.deep_equal(api.nvim_win_get_cursor(0), cursor)
    M.state.responses = M.state.responses + 1
    M.state.last_response = {
      method = method, err = err, result = result, items = items, stale = stale, ms = ms,
    }
    local history = M.state.history
    table.insert(history, { invoked = invoked == true, stale = stale, items = #items, err = err ~= nil })
    if #history > 50 then
      table.remove(history, 1)
    end
    if err then
      if err.code ~= REQUEST_CANCELLED then
        record_error(method, err)
      end
      status_changed()
      return
    end
    if not opts.refresh then
      M.state.status.latency_ms = ms -- a refresh's is the cache's, not what the user waited
    end
    if M.state.status.state == 'starting' or M.state.status.state == 'loading' then
      poll_status()
    end
    status_changed()
    if stale or not M.is_enabled(bufnr) then
      return
    end
    local mode = api.nvim_get_mode().mode
    if mode:sub(1, 1) ~= 'i' and not M._show_outside_insert then
      return
    end
    if #items == 0 and not opts.refresh then
      if opts.step then
        M.clear(bufnr) -- asked for alternatives, got none: keep nothing stale
      end
      return
    end
    if keep then
      local ghost = M.state.ghost
      local text = items[1] and remaining_text(bufnr, client, items[1])
      local same = ghost ~= nil and ghost.bufnr == bufnr and ghost.text == text
        and ghost.row == cursor[1] - 1 and ghost.col == cursor[2]
      local record = {
        before = ghost and ghost.bufnr == bufnr and ghost.text or vim.NIL,
        after = text or vim.NIL,
        same = same,
        ms = ms,
      }
      local log = opts.refresh and M.state.refreshes or M.state.typed_answers
      table.insert(log, record)
      if #log > 50 then
        table.remove(log, 1)
      end
      if #items == 0 then
        -- The server's whole is nothing here (it dropped the start that shows: a copy
        -- of the line below): the start goes too.
        M.clear(bufnr)
        return
      end
      if same or not text then
        return -- no redraw: the text on screen is the answer (no flicker)
      end
    end
    local index = 1
    if opts.step then
      index = (shown - 1 + opts.step) % #items + 1
    end
    show(bufnr, client, items, index)
  end, bufnr)
  if ok and request_id then
    pending[bufnr] = { client_id = client.id, request_id = request_id, sent = sent, here = here }
    status_changed()
  end
  return ok
end

--- Request after `debounce_ms` without typing or moving.
function M.schedule(bufnr)
  if not M.is_enabled(bufnr) then
    return
  end
  local timer = timers[bufnr]
  if not timer then
    timer = uv.new_timer()
    timers[bufnr] = timer
  end
  timer:stop()
  timer:start(M.config.debounce_ms, 0, vim.schedule_wrap(function()
    if api.nvim_buf_is_valid(bufnr) and api.nvim_get_current_buf() == bufnr then
      local mode = api.nvim_get_mode().mode
      if mode:sub(1, 1) == 'i' then
        M.request(bufnr, false)
      end
    end
  end))
end

--- Why a lspAssist/suggestionReady notice is not acted on (nil: ask again).
local function ready_ignored(params, ctx)
  if type(params) ~= 'table' or type(params.textDocument) ~= 'table' or type(params.position) ~= 'table' then
    return 'malformed'
  end
  local bufnr = api.nvim_get_current_buf()
  if vim.uri_from_bufnr(bufnr) ~= params.textDocument.uri then
    return 'not the current buffer'
  end
  local client = get_client(bufnr)
  if not client or client.id ~= ctx.client_id then
    return 'not attached'
  end
  if M.state.builtin then
    return 'use_builtin' -- vim.lsp.inline_completion shows only what it asked for
  end
  if not M.is_enabled(bufnr) then
    return 'disabled'
  end
  if api.nvim_get_mode().mode:sub(1, 1) ~= 'i' then
    return 'not in insert mode'
  end
  if pending[bufnr] then
    return 'a request is in flight'
  end
  -- The suggestion of that request still shows: the text is unchanged since, or the
  -- user typed into it (typing that does not match, a move or a dismiss removes it).
  local ghost = M.state.ghost
  local cursor = api.nvim_win_get_cursor(0)
  if not ghost or ghost.bufnr ~= bufnr or ghost.tick ~= api.nvim_buf_get_changedtick(bufnr)
    or ghost.row ~= cursor[1] - 1 or ghost.col ~= cursor[2] then
    return 'no suggestion shown'
  end
  local position = params.position
  -- Asked here, or before the cursor on the way typed since.
  if position.line > ghost.row
    or (position.line == ghost.row and byte_col(bufnr, position, client.offset_encoding) > ghost.col) then
    return 'another place'
  end
  return nil
end

--- lspAssist/suggestionReady: the whole of an early-answered suggestion is written, and
--- it is not the start that shows (longer, shorter, other, or nothing). Ask again at the
--- cursor (Automatic) when the suggestion still shows and nothing else is asked, and
--- show the answer in place of the start (none: clear it).
function M.on_suggestion_ready(err, params, ctx)
  if err then
    return
  end
  local reason = ready_ignored(params, ctx or {})
  local notice = {
    uri = type(params) == 'table' and params.textDocument and params.textDocument.uri or vim.NIL,
    version = type(params) == 'table' and params.textDocument and params.textDocument.version or vim.NIL,
    position = type(params) == 'table' and params.position or vim.NIL,
    action = reason or 'refresh',
  }
  table.insert(M.state.ready, notice)
  if #M.state.ready > 50 then
    table.remove(M.state.ready, 1)
  end
  if not reason then
    M.request(api.nvim_get_current_buf(), false, { refresh = true })
  end
end

local invoke_on_insert = false

--- Ask for a suggestion now (the trigger key, :LspAssistComplete). From normal mode it
--- enters insert mode after the cursor (like `a`) and asks there; after <C-o> it asks
--- once back in insert mode, where the cursor is again.
function M.complete()
  local bufnr = api.nvim_get_current_buf()
  if not get_client(bufnr) then
    no_server('the server is not attached to this buffer')
    return false
  end
  if not M.is_enabled(bufnr) then
    vim.notify('lsp-assist: suggestions are off here (:LspAssistEnable)', vim.log.levels.WARN)
    return false
  end
  local mode = api.nvim_get_mode().mode
  if mode:sub(1, 1) == 'i' then
    return M.request(bufnr, true)
  end
  if mode:sub(1, 2) == 'ni' then
    -- <C-o>: this runs in normal mode with the cursor one column left at the end of a
    -- line; an answer to a request sent now would be stale once insert mode resumes.
    local tries = 0
    local function again()
      tries = tries + 1
      if api.nvim_get_mode().mode:sub(1, 1) == 'i' then
        M.request(bufnr, true)
      elseif tries < 50 then
        vim.defer_fn(again, 10)
      end
    end
    vim.schedule(again)
    return true
  end
  invoke_on_insert = true
  api.nvim_feedkeys('a', 'n', false)
  return true
end

-- Accepting ----------------------------------------------------------------------------

--- Report an accepted suggestion to the server (the item's command, lspAssist.accept).
local function report_acceptance(client, record)
  local command = record.command
  if not command or not command.command then
    return
  end
  client_request(client, 'workspace/executeCommand', {
    command = command.command,
    arguments = command.arguments,
  }, function(err, result)
    record.response = { err = err, result = result }
    if err then
      record_error('workspace/executeCommand', err)
    end
  end, record.bufnr)
end

--- The next word of `text`: what is before it on the line, then the word (as
--- copilot.vim); at a line break, the break and the next line's indentation.
function M.next_word(text)
  local word = text:match('^[^%w_\n]*[%w_]*')
  if word == '' then
    word = text:match('^\n[ \t]*') or text:sub(1, 1)
  end
  return word
end

--- The rest of the ghost's current line; at a line break, the break and the next line.
function M.next_line(text)
  local line = text:match('^[^\n]+')
  if not line then
    line = text:match('^\n[^\n]*') or text
  end
  return line
end

local own_tick -- changedtick right after the plugin inserted text itself

--- Insert the ghost text: all of it (`kind` nil or 'all'), its next 'word' or 'line'.
--- The rest stays on screen; the server hears of the acceptance once all of it is in.
--- Returns true when there was a suggestion.
function M.accept(kind)
  local ghost = M.state.ghost
  if not ghost or ghost.bufnr ~= api.nvim_get_current_buf() then
    return false
  end
  local bufnr = ghost.bufnr
  M.clear()
  if api.nvim_buf_get_changedtick(bufnr) ~= ghost.tick then
    return false
  end
  local part = ghost.text
  if kind == 'word' then
    part = M.next_word(ghost.text)
  elseif kind == 'line' then
    part = M.next_line(ghost.text)
  end
  local rest = ghost.text:sub(#part + 1)
  local lines = vim.split(part, '\n', { plain = true })
  api.nvim_buf_set_text(bufnr, ghost.row, ghost.col, ghost.row, ghost.col, lines)
  local end_row = ghost.row + #lines - 1
  local end_col = (#lines == 1 and ghost.col or 0) + #lines[#lines]
  pcall(api.nvim_win_set_cursor, 0, { end_row + 1, end_col })
  own_tick = api.nvim_buf_get_changedtick(bufnr)
  local item = ghost.item
  item.accepted_text = (item.accepted_text or '') .. part
  if rest ~= '' then
    table.insert(M.state.partial, { kind = kind, inserted = part })
    -- From the start of the item's text to the end of what is in (Copilot's measure).
    tell(ghost.client_id, 'textDocument/didPartiallyAcceptCompletion', item, {
      item = wire_item(item),
      acceptedLength = utf16_len(item.text) - utf16_len(rest),
    })
    -- Cycling from here asks the server again: the other items started elsewhere.
    M.state.items = {}
    draw(bufnr, ghost.client_id, item, rest, 1, 1)
    return true
  end
  M.state.items = {}
  local record = { bufnr = bufnr, inserted = item.accepted_text, command = item.command, kind = kind or 'all' }
  table.insert(M.state.accepted, record)
  local client = vim.lsp.get_client_by_id(ghost.client_id)
  if client then
    report_acceptance(client, record)
  end
  return true
end

--- Remove the suggestion (and cancel the request on its way). True when there was one.
function M.dismiss()
  local bufnr = api.nvim_get_current_buf()
  local had = M.visible()
  if had then
    local ghost = M.state.ghost
    tell(ghost.client_id, 'lspAssist/didDismissCompletion', ghost.item, { item = { command = ghost.item.command } })
  end
  M.clear(bufnr)
  cancel_pending(bufnr)
  M.state.items = {}
  status_changed()
  return had
end

--- Show the next (`step` 1) or previous (-1) item of the answer. With one item shown,
--- ask again explicitly (a server may offer more then); with none, ask now.
function M.cycle(step)
  local bufnr = api.nvim_get_current_buf()
  local ghost = M.state.ghost
  if not ghost or ghost.bufnr ~= bufnr then
    return M.request(bufnr, true)
  end
  local items = M.state.items
  if #items > 1 then
    local client = vim.lsp.get_client_by_id(ghost.client_id)
    local n = #items
    for offset = 1, n - 1 do
      local index = (ghost.index - 1 + step * offset) % n + 1
      if client and show(bufnr, client, items, index) then
        return true
      end
    end
    return false
  end
  -- Ask once per position and text: the answer is the same until either changes.
  local key = table.concat({ bufnr, api.nvim_buf_get_changedtick(bufnr), ghost.row, ghost.col }, ':')
  if M.state.asked_alternatives == key then
    return false
  end
  M.state.asked_alternatives = key
  return M.request(bufnr, true, { step = step })
end

function M.visible()
  local ghost = M.state.ghost
  return ghost ~= nil and ghost.bufnr == api.nvim_get_current_buf()
end

-- Attaching ----------------------------------------------------------------------------

local function keys_config()
  local keys = vim.tbl_extend('force', {}, M.config.keys or {})
  if M.config.accept_key ~= nil then
    keys.accept = M.config.accept_key
  end
  return keys
end

--- An insert-mode mapping that runs `action` when a suggestion shows (or `always`),
--- and is the plain key otherwise.
local function map(bufnr, key, action, desc, always)
  if not key then
    return
  end
  vim.keymap.set('i', key, function()
    if always or M.visible() then
      return '<Cmd>lua require("lsp-assist").' .. action .. '<CR>'
    end
    return key
  end, { buffer = bufnr, expr = true, replace_keycodes = true, desc = 'lsp-assist: ' .. desc })
end

local function map_keys(bufnr)
  local keys = keys_config()
  map(bufnr, keys.accept, 'accept()', 'accept the suggestion')
  map(bufnr, keys.accept_word, 'accept("word")', 'accept the next word of the suggestion')
  map(bufnr, keys.accept_line, 'accept("line")', 'accept the next line of the suggestion')
  map(bufnr, keys.dismiss, 'dismiss()', 'dismiss the suggestion')
  map(bufnr, keys.trigger, 'complete()', 'ask for a suggestion now', true)
  map(bufnr, keys.next, 'cycle(1)', 'next suggestion', true)
  map(bufnr, keys.prev, 'cycle(-1)', 'previous suggestion', true)
end

local function map_builtin_accept(bufnr)
  local key = keys_config().accept
  if not key then
    return
  end
  vim.keymap.set('i', key, function()
    if vim.lsp.inline_completion.get({ bufnr = bufnr }) then
      return ''
    end
    return key
  end, { buffer = bufnr, expr = true, replace_keycodes = true, desc = 'lsp-assist: accept suggestion' })
end

--- InsertCharPre with `char` about to go in at the cursor: when it is the ghost's next
--- character, show the rest in place (same extmark, same redraw: no clear, no flicker)
--- and return true. The extmark's right gravity carries it past the typed character;
--- TextChangedI then records the new changedtick, and the request made after it keeps
--- the ghost unless the server's answer differs.
local function type_through(bufnr, char)
  local ghost = M.state.ghost
  if not ghost or ghost.bufnr ~= bufnr or char == nil or char == '' then
    return false
  end
  local cursor = api.nvim_win_get_cursor(0)
  if cursor[1] - 1 ~= ghost.row or cursor[2] ~= ghost.col
    or ghost.tick ~= api.nvim_buf_get_changedtick(bufnr)
    or ghost.text:sub(1, #char) ~= char then
    return false
  end
  local rest = ghost.text:sub(#char + 1)
  if rest == '' then
    return false -- all of it typed: nothing left to show
  end
  local opts = ghost_opts(rest)
  opts.id = ghost.extmark
  local ok, err = pcall(api.nvim_buf_set_extmark, bufnr, ns, ghost.row, ghost.col, opts)
  if not ok then
    record_error('extmark', err)
    return false
  end
  ghost.text = rest
  ghost.col = ghost.col + #char
  ghost.tick = nil -- set by TextChangedI, once the character is in
  ghost.typed = true
  M.state.typed_through = (M.state.typed_through or 0) + 1
  return true
end

local cursor_timer = nil
local last_report = nil -- { client_id, bufnr, line, character } of the last report sent

--- Tell the server where the cursor rests (lspAssist/didMoveCursor), once per place.
local function report_cursor(bufnr)
  if bufnr ~= api.nvim_get_current_buf() or api.nvim_get_mode().mode ~= 'n' then
    return
  end
  local client = get_client(bufnr)
  if not client or M.state.status.state ~= 'ready' then
    return
  end
  local params = vim.lsp.util.make_position_params(0, client.offset_encoding or 'utf-16')
  local at = { client.id, bufnr, params.position.line, params.position.character }
  if last_report and vim.deep_equal(last_report, at) then
    return
  end
  last_report = at
  local ok, err = pcall(client_call, client, 'notify', 'lspAssist/didMoveCursor', {
    textDocument = { uri = params.textDocument.uri },
    position = params.position,
  })
  if not ok then
    record_error('lspAssist/didMoveCursor', err)
    return
  end
  table.insert(M.state.cursor_reports, { bufnr = bufnr, line = at[3], character = at[4] })
  if #M.state.cursor_reports > 50 then
    table.remove(M.state.cursor_reports, 1)
  end
end

--- Report the cursor once it has rested `report_cursor_ms` (a newer move restarts the wait).
schedule_cursor_report = function(bufnr)
  local wait = M.config.report_cursor_ms
  if not wait or wait <= 0 then
    return
  end
  cursor_timer = cursor_timer or uv.new_timer()
  cursor_timer:stop()
  cursor_timer:start(wait, 0, vim.schedule_wrap(function()
    if api.nvim_buf_is_valid(bufnr) then
      report_cursor(bufnr)
    end
  end))
end

local function on_attach(client, bufnr)
  M.state.attached[bufnr] = client.id
  local caps = client.server_capabilities or {}
  M.state.clients[client.id] = {
    name = client.name,
    initialized = client.initialized ~= false,
    inline = caps.inlineCompletionProvider ~= nil and caps.inlineCompletionProvider ~= false,
    completion = caps.completionProvider ~= nil,
    commands = caps.executeCommandProvider and caps.executeCommandProvider.commands or {},
  }
  if M.state.status.state == 'starting' then
    set_status('loading', nil)
  end
  poll_status()
  local builtin = M.config.use_builtin and vim.lsp.inline_completion ~= nil
    and M.config.method ~= 'completion' and M.state.clients[client.id].inline
  M.state.builtin = builtin
  if builtin then
    builtin_enable(bufnr)
    map_builtin_accept(bufnr)
    return
  end
  local group = api.nvim_create_augroup('lsp-assist.buf.' .. bufnr, { clear = true })
  api.nvim_create_autocmd({ 'InsertCharPre', 'TextChangedI', 'TextChangedP' }, {
    group = group,
    buffer = bufnr,
    callback = function(ev)
      if ev.event == 'InsertCharPre' then
        if not type_through(bufnr, vim.v.char) then
          M.clear(bufnr) -- the ghost no longer matches the text
        end
      else
        local ghost = M.state.ghost
        if ghost and ghost.bufnr == bufnr and ghost.typed and ghost.tick == nil then
          local cursor = api.nvim_win_get_cursor(0)
          if cursor[1] - 1 == ghost.row and cursor[2] == ghost.col then
            ghost.tick = api.nvim_buf_get_changedtick(bufnr)
          else
            M.clear(bufnr) -- the character did not land where the ghost is
          end
        end
        if api.nvim_buf_get_changedtick(bufnr) ~= own_tick then
          M.schedule(bufnr)
        end
      end
    end,
  })
  api.nvim_create_autocmd('InsertEnter', {
    group = group,
    buffer = bufnr,
    callback = function()
      if invoke_on_insert then
        invoke_on_insert = false
        vim.schedule(function()
          M.request(bufnr, true)
        end)
      elseif M.config.trigger_on_insert_enter then
        M.schedule(bufnr)
      end
    end,
  })
  api.nvim_create_autocmd({ 'InsertLeave', 'BufLeave' }, {
    group = group,
    buffer = bufnr,
    callback = function()
      M.clear(bufnr)
      cancel_pending(bufnr)
      if timers[bufnr] then
        timers[bufnr]:stop()
      end
    end,
  })
  api.nvim_create_autocmd({ 'CursorMoved', 'BufEnter' }, {
    group = group,
    buffer = bufnr,
    callback = function()
      schedule_cursor_report(bufnr)
    end,
  })
  schedule_cursor_report(bufnr) -- where the file opened (the cursor may rest there)
  api.nvim_create_autocmd('CursorMovedI', {
    group = group,
    buffer = bufnr,
    callback = function()
      local ghost = M.state.ghost
      local cursor = api.nvim_win_get_cursor(0)
      if ghost and ghost.bufnr == bufnr and cursor[1] - 1 == ghost.row and cursor[2] == ghost.col then
        return -- the suggestion is where the cursor is (after an accepted word, say)
      end
      M.clear(bufnr)
      if M.config.trigger_on_cursor_moved then
        M.schedule(bufnr)
      end
    end,
  })
  map_keys(bufnr)
end

-- Commands -----------------------------------------------------------------------------

local function execute(command, arguments, callback)
  local bufnr = api.nvim_get_current_buf()
  local client = get_client(bufnr) or any_client()
  if not client then
    no_server('the server is not running')
    return false
  end
  client_request(client, 'workspace/executeCommand', { command = command, arguments = arguments },
    function(err, result)
      callback(err, result)
    end, bufnr)
  return true
end

local function show_scratch(title, text, filetype)
  vim.cmd('botright new')
  local buf = api.nvim_get_current_buf()
  vim.bo[buf].buftype = 'nofile'
  vim.bo[buf].bufhidden = 'wipe'
  vim.bo[buf].swapfile = false
  pcall(api.nvim_buf_set_name, buf, title)
  api.nvim_buf_set_lines(buf, 0, -1, false, vim.split(text, '\n', { plain = true }))
  vim.bo[buf].filetype = filetype
  vim.bo[buf].modifiable = false
end

local function render(result)
  if type(result) == 'string' then
    return result, 'markdown'
  end
  if type(result) == 'table' and type(result.text) == 'string' then
    return result.text, 'markdown'
  end
  return vim.inspect(result), 'lua'
end

local function notify_error(err)
  vim.notify('lsp-assist: ' .. (err.message or vim.inspect(err)), vim.log.levels.ERROR)
end

--- Show the context the server would send to the model at the cursor.
function M.explain(callback)
  local bufnr = api.nvim_get_current_buf()
  local client = get_client(bufnr)
  local encoding = client and client.offset_encoding or 'utf-16'
  local params = vim.lsp.util.make_position_params(0, encoding)
  return execute('lspAssist.explainContext',
    { params.textDocument.uri, params.position.line, params.position.character },
    callback or function(err, result)
      if err then
        return notify_error(err)
      end
      local text, ft = render(result)
      show_scratch('lsp-assist://explain', text, ft)
    end)
end

--- Show the server's status (model, cache, latency figures).
function M.status(callback)
  return execute('lspAssist.status', {}, function(err, result)
    if not err then
      apply_server_status(result)
    end
    if callback then
      return callback(err, result)
    end
    if err then
      return notify_error(err)
    end
    show_scratch('lsp-assist://status', vim.inspect(result), 'lua')
  end)
end

--- Change server settings at run time (workspace/didChangeConfiguration).
function M.set_settings(values)
  M.config.settings = vim.tbl_extend('force', M.config.settings, values)
  for _, client in ipairs(vim.lsp.get_clients({ name = NAME })) do
    local settings = next(M.config.settings) and M.config.settings or vim.empty_dict()
    client.settings = { lspAssist = settings }
    local params = { settings = { lspAssist = settings } }
    if has('0.11') then
      client:notify('workspace/didChangeConfiguration', params)
    else
      client.notify('workspace/didChangeConfiguration', params)
    end
  end
  -- A new model may be loading now.
  vim.defer_fn(poll_status, 200)
end

-- Setup --------------------------------------------------------------------------------

--- Apply the ghost-text highlight: a grey that shows in 256-colour terminals too
--- (copilot.vim's CopilotSuggestion colours); `default`, so a colour scheme or the
--- user's own :highlight wins.
function M.set_highlight()
  api.nvim_set_hl(0, 'LspAssistGhost', { fg = '#808080', ctermfg = 244, default = true })
end

--- The command to start, or nil (with an error shown) when it cannot be run.
local function resolve_cmd(cmd)
  if cmd == nil then
    if vim.fn.executable('lsp-assist') == 1 then
      return { 'lsp-assist', 'serve' }
    end
    local venv = M.venv_server()
    if venv then
      return { venv, 'serve' }
    end
    cmd = { 'lsp-assist', 'serve' }
  end
  if type(cmd) ~= 'table' or type(cmd[1]) ~= 'string' or vim.fn.executable(cmd[1]) == 1 then
    return cmd -- a function (an in-process server) or an executable
  end
  local venv = M.venv_server()
  local fix = venv
      and ("use cmd = { '%s', 'serve' }, or put %s on PATH"):format(venv, vim.fn.fnamemodify(venv, ':h'))
    or ('run `make` in the lsp-assist repository and use cmd = { \'<repo>/.venv/bin/lsp-assist\', '
      .. "'serve' }, or put <repo>/.venv/bin on PATH")
  local message = ("lsp-assist: the server command '%s' is not executable (not found on PATH); %s")
    :format(cmd[1], fix)
  M.state.cmd_error = message
  set_status('error', ('%s not found'):format(cmd[1]))
  vim.notify(message, vim.log.levels.ERROR)
  return nil
end

local function user_commands()
  local function filetypes()
    return vim.fn.getcompletion('', 'filetype')
  end
  api.nvim_create_user_command('LspAssistExplain', function()
    M.explain()
  end, { bar = true, desc = 'lsp-assist: show the context built at the cursor' })
  api.nvim_create_user_command('LspAssistStatus', function()
    M.status()
  end, { bar = true, desc = 'lsp-assist: show the server status' })
  api.nvim_create_user_command('LspAssistComplete', function()
    M.complete()
  end, { bar = true, desc = 'lsp-assist: ask for a suggestion now' })
  api.nvim_create_user_command('LspAssistEnable', function(args)
    M.enable(args.args)
  end, { bar = true, nargs = '?', complete = filetypes, desc = 'lsp-assist: suggestions on (everywhere or for a filetype)' })
  api.nvim_create_user_command('LspAssistDisable', function(args)
    M.disable(args.args)
  end, { bar = true, nargs = '?', complete = filetypes, desc = 'lsp-assist: suggestions off (everywhere or for a filetype)' })
  api.nvim_create_user_command('LspAssistRestart', function()
    M.restart()
  end, { bar = true, desc = 'lsp-assist: stop the server if it runs, start a fresh one' })
  api.nvim_create_user_command('LspAssistToggle', function()
    local on = M.toggle(0)
    vim.notify('lsp-assist: suggestions ' .. (on and 'on' or 'off') .. ' in this buffer')
  end, { bar = true, desc = 'lsp-assist: suggestions on/off in this buffer' })
end

local restarting = {} -- client_id -> true: stopped by M.restart, its exit is no error
local lsp_config -- what vim.lsp.config / vim.lsp.start get (built by register)

--- The vim.lsp.config table for the configured command `cmd`.
local function build_lsp_config(config, cmd)
  local settings = vim.deepcopy(config.settings)
  -- Empty tables are sent as JSON objects, not arrays.
  local init_options = next(settings) and settings or vim.empty_dict()
  local built = vim.tbl_deep_extend('force', {
    cmd = cmd,
    filetypes = config.filetypes,
    root_markers = config.root_markers,
    init_options = init_options,
    settings = { lspAssist = init_options },
    -- Merged into make_client_capabilities() by the client.
    capabilities = { experimental = { [READY_CAPABILITY] = true } },
    handlers = {
      [READY] = function(...)
        return M.on_suggestion_ready(...)
      end,
    },
  }, config.lsp or {})
  local user_on_exit = built.on_exit
  built.on_exit = function(code, signal, client_id)
    stop_polling()
    local restarted = restarting[client_id]
    restarting[client_id] = nil
    if not restarted and (code ~= 0 or (signal and signal ~= 0)) then
      local reason = ('server exited (code %s, signal %s)'):format(code, signal)
      set_status('error', reason .. ', ' .. RESTART_HINT)
      vim.schedule(function()
        local said = stderr_tail()
        local tail = #said > 0
            and ('; the last it wrote on stderr:\n  %s\n'):format(table.concat(said, '\n  '))
          or ' (nothing on stderr); '
        vim.notify(('lsp-assist: the %s%sfix `cmd` or the settings if need be, then run %s'
          .. ' (the LSP log has all of it: :lua print(vim.lsp.get_log_path()))')
          :format(reason, tail, RESTART_HINT), vim.log.levels.ERROR)
      end)
    end
    for bufnr, id in pairs(M.state.attached) do
      if id == client_id then
        M.state.attached[bufnr] = nil
        pending[bufnr] = nil
      end
    end
    if user_on_exit then
      return user_on_exit(code, signal, client_id)
    end
  end
  return built
end

--- Resolve the configured command and register the server's config; false when the
--- command cannot run. `exact`: replace the registered config rather than merge into it
--- (vim.lsp.config merges lists index by index: a shorter cmd would keep the old tail).
local function register(exact)
  local cmd = resolve_cmd(M.config.cmd)
  if not cmd then
    return false
  end
  M.config.resolved_cmd = cmd
  M.state.stderr, M.state.stderr_partial = {}, nil -- the new server's own
  lsp_config = build_lsp_config(M.config, cmd)
  if vim.lsp.config and vim.lsp.enable then
    if exact then
      vim.lsp.config[NAME] = lsp_config
    else
      vim.lsp.config(NAME, lsp_config)
    end
  end
  return true
end

--- Start a client for `bufnr` (Neovim 0.10, without vim.lsp.config).
local function start_buffer(bufnr)
  local config = M.config
  local root = vim.fs.root and vim.fs.root(bufnr, config.root_markers) or vim.fn.getcwd()
  local start_config = vim.tbl_extend('force', lsp_config, { name = NAME, root_dir = root or vim.fn.getcwd() })
  start_config.filetypes, start_config.root_markers = nil, nil
  vim.lsp.start(start_config, { bufnr = bufnr })
end

--- Start the server for the buffers of the configured filetypes, open and to come.
local function start()
  if vim.lsp.config and vim.lsp.enable then
    vim.lsp.enable(NAME) -- also starts it for the buffers already open
    return
  end
  api.nvim_create_autocmd('FileType', {
    group = api.nvim_create_augroup('lsp-assist.start', { clear = true }),
    pattern = M.config.filetypes,
    callback = function(ev)
      start_buffer(ev.buf)
    end,
  })
  for _, bufnr in ipairs(api.nvim_list_bufs()) do
    if api.nvim_buf_is_loaded(bufnr) and vim.bo[bufnr].buftype == ''
      and vim.tbl_contains(M.config.filetypes, vim.bo[bufnr].filetype) then
      start_buffer(bufnr)
    end
  end
end

--- Stop the server (if it still runs) and start a fresh one for the open buffers, with
--- the command and settings in M.config now (after the server exited, or after
--- changing `cmd`). `callback(ok)` runs once the new client is asked to start.
function M.restart(callback)
  if not M.state.setup then
    vim.notify('lsp-assist: setup() has not run', vim.log.levels.WARN)
    return false
  end
  stop_polling()
  M.clear()
  local old = vim.lsp.get_clients({ name = NAME })
  for _, client in ipairs(old) do
    restarting[client.id] = true
    client_call(client, 'stop')
  end
  for bufnr in pairs(M.state.attached) do
    cancel_pending(bufnr)
  end
  local waited = 0
  local function go()
    -- Start once the old ones are gone (a stopping client is never reused, but two
    -- servers would load the model at once); force them after 2 s, go on after 4 s.
    local alive = vim.tbl_filter(function(client)
      return vim.lsp.get_client_by_id(client.id) ~= nil
    end, old)
    if #alive > 0 and waited < 4000 then
      if waited == 2000 then
        for _, client in ipairs(alive) do
          client_call(client, 'stop', true)
        end
      end
      waited = waited + 50
      vim.defer_fn(go, 50)
      return
    end
    M.state.attached = {}
    M.state.cmd_error = nil
    M.state.status.progress = {}
    M.state.status.latency_ms = nil
    set_status('starting', nil)
    local ok = register(true)
    if ok then
      start()
    end
    if callback then
      callback(ok)
    end
  end
  go()
  return true
end

--- Start the server for the configured filetypes and show its suggestions.
---@param opts? table see M.defaults
function M.setup(opts)
  M.config = vim.tbl_deep_extend('force', vim.deepcopy(M.defaults), opts or {})
  if opts and opts.settings then
    M.config.settings = opts.settings -- a list-valued setting must not be merged
  end
  if opts and opts.disabled_filetypes then
    M.config.disabled_filetypes = vim.deepcopy(opts.disabled_filetypes)
  end
  local config = M.config
  M.set_highlight()
  api.nvim_create_autocmd('ColorScheme', {
    group = api.nvim_create_augroup('lsp-assist.highlight', { clear = true }),
    callback = M.set_highlight,
  })
  user_commands()
  capture_stderr()
  local next_edit = config.next_edit == false and { enabled = false } or config.next_edit
  require('lsp-assist.next_edit').setup(next_edit)
  M.state.setup = true
  M.state.status.state = 'starting'
  M.state.cmd_error = nil

  local group = api.nvim_create_augroup('lsp-assist.attach', { clear = true })
  api.nvim_create_autocmd('LspAttach', {
    group = group,
    callback = function(ev)
      local client = vim.lsp.get_client_by_id(ev.data.client_id)
      if client and client.name == NAME then
        on_attach(client, ev.buf)
      end
    end,
  })
  api.nvim_create_autocmd('LspProgress', {
    group = group,
    callback = function(ev)
      local client = ev.data and vim.lsp.get_client_by_id(ev.data.client_id)
      if client and client.name == NAME then
        on_progress(ev.data.params)
      end
    end,
  })

  -- After the autocmds: a command fixed later is started by M.restart.
  if not register(false) then
    return false
  end
  start()
  return true
end

return M
