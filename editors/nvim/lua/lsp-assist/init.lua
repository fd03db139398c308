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
-- This file is the public API (setup, the commands, the functions below) and the
-- buffer's autocmds; it wires the modules below and re-exports their functions. None of
-- them requires this one. The rest, by concern:
--   state.lua    what the plugin keeps while it runs (every module requires it)
--   config.lua   the options: their defaults, the current ones, enabled or not here
--   decide.lua   whether to ask, whether an answer may show, type-through (pure)
--   request.lua  the requests, the suggestionReady notices, cursor reports
--   render.lua   the ghost text (extmarks)
--   keys.lua     accept, accept word/line, dismiss, cycle, the mappings
--   status.lua   the status and the statusline, the server's stderr
--   server.lua   the server command, its vim.lsp.config, start and restart
--   client.lua   LSP client calls (0.10 and 0.11+), requests in flight, telemetry
--   records.lua  what only the tests read, behind setup({ debug_records = true })
--   next_edit.lua, health.lua
--
-- require('lsp-assist').state is state.lua (clients, the ghost text, the status);
-- require('lsp-assist.records') holds, with debug_records, the records the headless
-- tests read (requests and answers, notices, telemetry sent, acceptances, errors).

local M = {}

local api = vim.api

local client = require('lsp-assist.client')
local config = require('lsp-assist.config')
local decide = require('lsp-assist.decide')
local keys = require('lsp-assist.keys')
local records = require('lsp-assist.records')
local render = require('lsp-assist.render')
local request = require('lsp-assist.request')
local server = require('lsp-assist.server')
local state = require('lsp-assist.state')
local status = require('lsp-assist.status')

local NAME = client.NAME

--- The server `make` installs in the repository's virtual environment.
M.venv_server = server.venv_server

--- The options and their defaults (config.lua).
M.defaults = config.defaults

--- The options now: `M.config` reads and writes config.current (a whole new table too),
--- where the modules read them.
setmetatable(M, {
  __index = function(_, key)
    if key == 'config' then
      return config.current
    end
  end,
  __newindex = function(face, key, value)
    if key == 'config' then
      config.current = value
    else
      rawset(face, key, value)
    end
  end,
})

--- What the plugin keeps while it runs (state.lua); the records only tests read are
--- require('lsp-assist.records')'s.
M.state = state

-- Status -------------------------------------------------------------------------------

--- The server's last stderr lines, with a line it left unfinished.
M.stderr_tail = status.stderr_tail

--- The plugin's state for the current buffer: off, starting, loading, ready, thinking, error.
M.status_info = status.info

--- Statusline component: "lsp-assist: ready 120 ms", "lsp-assist: loading", ...
--- Empty in buffers the server is not attached to.
M.statusline = status.line

-- Enable / disable ---------------------------------------------------------------------

--- Whether suggestions are on for `bufnr` (globally, for its filetype, for the buffer).
M.is_enabled = config.enabled

local function builtin_enable(bufnr)
  if state.builtin and vim.lsp.inline_completion then
    vim.lsp.inline_completion.enable(M.is_enabled(bufnr), { bufnr = bufnr })
  end
end

local function refresh_enabled()
  for bufnr in pairs(state.attached) do
    if api.nvim_buf_is_valid(bufnr) then
      if not M.is_enabled(bufnr) then
        M.clear(bufnr)
        client.cancel_pending(bufnr)
      end
      builtin_enable(bufnr)
    end
  end
  status.changed()
end

--- Turn suggestions on everywhere, or for one filetype.
function M.enable(filetype)
  if filetype and filetype ~= '' then
    config.current.disabled_filetypes = vim.tbl_filter(function(ft)
      return ft ~= filetype
    end, config.current.disabled_filetypes)
  else
    config.current.enabled = true
  end
  refresh_enabled()
end

--- Turn suggestions off everywhere, or for one filetype.
function M.disable(filetype)
  if filetype and filetype ~= '' then
    if not vim.tbl_contains(config.current.disabled_filetypes, filetype) then
      table.insert(config.current.disabled_filetypes, filetype)
    end
  else
    config.current.enabled = false
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

-- Suggestions --------------------------------------------------------------------------

--- Remove the ghost text (in `bufnr`, or wherever it shows).
M.clear = render.clear

--- Ask the server for a suggestion at the cursor. `invoked`: the user asked explicitly.
--- `opts.step`: when the answer comes, show the item `step` places after the shown one
--- (cycling), wrapping around. `opts.refresh`: ask even though a suggestion shows here
--- (lspAssist/suggestionReady), and keep the shown one unless the answer differs.
M.request = request.request

--- Request after `debounce_ms` without typing or moving.
M.schedule = request.schedule

--- lspAssist/suggestionReady (the server's handler): ask again for the whole of an
--- early-answered suggestion that still shows.
M.on_suggestion_ready = request.on_suggestion_ready

--- Ask for a suggestion now (the trigger key, :LspAssistComplete).
M.complete = request.complete

--- The next word of a suggestion's text (what <M-Right> inserts) and the rest of its
--- line (<M-C-Right>).
M.next_word = decide.next_word
M.next_line = decide.next_line

--- Insert the ghost text: all of it (`kind` nil or 'all'), its next 'word' or 'line'.
M.accept = keys.accept

--- Remove the suggestion (and cancel the request on its way). True when there was one.
M.dismiss = keys.dismiss

--- Show the next (`step` 1) or previous (-1) item of the answer.
M.cycle = keys.cycle

--- Whether a suggestion shows in the current buffer.
M.visible = keys.visible

-- Attaching ----------------------------------------------------------------------------

--- The buffer's autocmds: typing (type-through, then ask after the debounce), entering
--- and leaving insert mode, moving the cursor; and its keys.
local function attach_autocmds(bufnr)
  local group = api.nvim_create_augroup('lsp-assist.buf.' .. bufnr, { clear = true })
  api.nvim_create_autocmd({ 'InsertCharPre', 'TextChangedI', 'TextChangedP' }, {
    group = group,
    buffer = bufnr,
    callback = function(ev)
      if ev.event == 'InsertCharPre' then
        if not keys.type_through(bufnr, vim.v.char) then
          M.clear(bufnr) -- the ghost no longer matches the text
        end
      else
        keys.newline_through(bufnr) -- Enter into a ghost that starts with the line break
        local ghost = state.ghost
        if ghost and ghost.bufnr == bufnr and ghost.typed and ghost.tick == nil then
          if decide.at(ghost, render.place(bufnr)) then
            ghost.tick = api.nvim_buf_get_changedtick(bufnr)
          else
            M.clear(bufnr) -- the character did not land where the ghost is
          end
        end
        if api.nvim_buf_get_changedtick(bufnr) ~= keys.own_tick then
          M.schedule(bufnr)
        end
      end
    end,
  })
  api.nvim_create_autocmd('InsertEnter', {
    group = group,
    buffer = bufnr,
    callback = function()
      if request.invoke_on_insert then
        request.invoke_on_insert = false
        vim.schedule(function()
          M.request(bufnr, true)
        end)
      elseif config.current.trigger_on_insert_enter then
        M.schedule(bufnr)
      end
    end,
  })
  api.nvim_create_autocmd({ 'InsertLeave', 'BufLeave' }, {
    group = group,
    buffer = bufnr,
    callback = function()
      M.clear(bufnr)
      client.cancel_pending(bufnr)
      request.stop(bufnr)
    end,
  })
  api.nvim_create_autocmd({ 'CursorMoved', 'BufEnter' }, {
    group = group,
    buffer = bufnr,
    callback = function()
      request.schedule_cursor_report(bufnr)
    end,
  })
  request.schedule_cursor_report(bufnr) -- where the file opened (the cursor may rest there)
  api.nvim_create_autocmd('CursorMovedI', {
    group = group,
    buffer = bufnr,
    callback = function()
      if keys.newline_through(bufnr) or decide.at(state.ghost, render.place(bufnr)) then
        return -- the suggestion is where the cursor is (after an accepted word or Enter)
      end
      M.clear(bufnr)
      if config.current.trigger_on_cursor_moved then
        M.schedule(bufnr)
      end
    end,
  })
  keys.map(bufnr)
end

local function on_attach(lsp_client, bufnr)
  state.attached[bufnr] = lsp_client.id
  local caps = lsp_client.server_capabilities or {}
  state.clients[lsp_client.id] = {
    name = lsp_client.name,
    initialized = lsp_client.initialized ~= false,
    inline = caps.inlineCompletionProvider ~= nil and caps.inlineCompletionProvider ~= false,
    completion = caps.completionProvider ~= nil,
    commands = caps.executeCommandProvider and caps.executeCommandProvider.commands or {},
  }
  if state.status.state == 'starting' then
    status.set('loading', nil)
  end
  status.poll()
  local builtin = config.current.use_builtin and vim.lsp.inline_completion ~= nil
    and config.current.method ~= 'completion' and state.clients[lsp_client.id].inline
  state.builtin = builtin
  if builtin then
    builtin_enable(bufnr)
    keys.map_builtin_accept(bufnr)
    return
  end
  attach_autocmds(bufnr)
end

-- Commands -----------------------------------------------------------------------------

local function execute(command, arguments, callback)
  local bufnr = api.nvim_get_current_buf()
  local lsp_client = client.get(bufnr) or client.any()
  if not lsp_client then
    status.no_server('the server is not running')
    return false
  end
  client.request(lsp_client, 'workspace/executeCommand', { command = command, arguments = arguments },
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

local function as_text(result)
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
  local lsp_client = client.get(bufnr)
  local encoding = lsp_client and lsp_client.offset_encoding or 'utf-16'
  local params = vim.lsp.util.make_position_params(0, encoding)
  return execute('lspAssist.explainContext',
    { params.textDocument.uri, params.position.line, params.position.character },
    callback or function(err, result)
      if err then
        return notify_error(err)
      end
      local text, ft = as_text(result)
      show_scratch('lsp-assist://explain', text, ft)
    end)
end

--- Show the server's status (model, cache, latency figures).
function M.status(callback)
  return execute('lspAssist.status', {}, function(err, result)
    if not err then
      status.apply(result)
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
  config.current.settings = vim.tbl_extend('force', config.current.settings, values)
  for _, lsp_client in ipairs(vim.lsp.get_clients({ name = NAME })) do
    local settings = next(config.current.settings) and config.current.settings or vim.empty_dict()
    lsp_client.settings = { lspAssist = settings }
    client.call(lsp_client, 'notify', 'workspace/didChangeConfiguration', { settings = { lspAssist = settings } })
  end
  -- A new model may be loading now.
  vim.defer_fn(status.poll, 200)
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

-- Setup --------------------------------------------------------------------------------

--- Apply the ghost-text highlight (LspAssistGhost: grey, a default that a colour scheme
--- or the user's :highlight overrides).
M.set_highlight = render.set_highlight

--- Stop the server (if it still runs) and start a fresh one for the open buffers, with
--- the command and settings in M.config now (after the server exited, or after
--- changing `cmd`). `callback(ok)` runs once the new client is asked to start.
function M.restart(callback)
  if not state.setup then
    vim.notify('lsp-assist: setup() has not run', vim.log.levels.WARN)
    return false
  end
  M.clear()
  server.restart(callback)
  return true
end

--- Start the server for the configured filetypes and show its suggestions.
---@param opts? table see M.defaults
function M.setup(opts)
  config.current = vim.tbl_deep_extend('force', vim.deepcopy(M.defaults), opts or {})
  if opts and opts.settings then
    config.current.settings = opts.settings -- a list-valued setting must not be merged
  end
  if opts and opts.disabled_filetypes then
    config.current.disabled_filetypes = vim.deepcopy(opts.disabled_filetypes)
  end
  local options = config.current
  records.on = options.debug_records == true
  M.set_highlight()
  api.nvim_create_autocmd('ColorScheme', {
    group = api.nvim_create_augroup('lsp-assist.highlight', { clear = true }),
    callback = M.set_highlight,
  })
  user_commands()
  status.capture_stderr()
  local next_edit = options.next_edit == false and { enabled = false } or options.next_edit
  require('lsp-assist.next_edit').setup(next_edit)
  state.setup = true
  state.status.state = 'starting'
  state.cmd_error = nil

  local group = api.nvim_create_augroup('lsp-assist.attach', { clear = true })
  api.nvim_create_autocmd('LspAttach', {
    group = group,
    callback = function(ev)
      local lsp_client = vim.lsp.get_client_by_id(ev.data.client_id)
      if lsp_client and lsp_client.name == NAME then
        on_attach(lsp_client, ev.buf)
      end
    end,
  })
  api.nvim_create_autocmd('LspProgress', {
    group = group,
    callback = function(ev)
      local lsp_client = ev.data and vim.lsp.get_client_by_id(ev.data.client_id)
      if lsp_client and lsp_client.name == NAME then
        status.on_progress(ev.data.params)
      end
    end,
  })

  -- After the autocmds: a command fixed later is started by M.restart.
  if not server.register(false) then
    return false
  end
  server.start()
  return true
end

return M
