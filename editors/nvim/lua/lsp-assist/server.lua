-- The server process: the command to run (PATH, else the repository's .venv), its
-- vim.lsp.config (capabilities, the suggestionReady handler, on_exit into the error
-- state), starting it for the configured filetypes, and restarting it.

local M = {}

local api = vim.api
local client = require('lsp-assist.client')
local config = require('lsp-assist.config')
local request = require('lsp-assist.request')
local state = require('lsp-assist.state')
local status = require('lsp-assist.status')

local READY = 'lspAssist/suggestionReady'
local READY_CAPABILITY = 'lspAssistSuggestionReady'
local NAME = client.NAME

local restarting = {} -- client_id -> true: stopped by M.restart, its exit is no error
local lsp_config -- what vim.lsp.config / vim.lsp.start get (built by register)

--- The repository this plugin lives in (editors/nvim/lua/lsp-assist/server.lua).
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
  state.cmd_error = message
  status.set('error', ('%s not found'):format(cmd[1]))
  vim.notify(message, vim.log.levels.ERROR)
  return nil
end

--- Tell the user that the server exited on its own, with what it wrote on stderr.
local function exited(code, signal)
  local reason = ('server exited (code %s, signal %s)'):format(code, signal)
  status.set('error', reason .. ', ' .. status.RESTART_HINT)
  vim.schedule(function()
    local said = status.stderr_tail()
    local tail = #said > 0
        and ('; the last it wrote on stderr:\n  %s\n'):format(table.concat(said, '\n  '))
      or ' (nothing on stderr); '
    vim.notify(('lsp-assist: the %s%sfix `cmd` or the settings if need be, then run %s'
      .. ' (the LSP log has all of it: :lua print(vim.lsp.get_log_path()))')
      :format(reason, tail, status.RESTART_HINT), vim.log.levels.ERROR)
  end)
end

--- The vim.lsp.config table for the options `options` and their command `cmd`.
local function build_lsp_config(options, cmd)
  local settings = vim.deepcopy(options.settings)
  -- Empty tables are sent as JSON objects, not arrays.
  local init_options = next(settings) and settings or vim.empty_dict()
  local built = vim.tbl_deep_extend('force', {
    cmd = cmd,
    filetypes = options.filetypes,
    root_markers = options.root_markers,
    init_options = init_options,
    settings = { lspAssist = init_options },
    -- Merged into make_client_capabilities() by the client.
    capabilities = { experimental = { [READY_CAPABILITY] = true } },
    handlers = {
      [READY] = function(...)
        return request.on_suggestion_ready(...)
      end,
    },
  }, options.lsp or {})
  local user_on_exit = built.on_exit
  built.on_exit = function(code, signal, client_id)
    status.stop_polling()
    local restarted = restarting[client_id]
    restarting[client_id] = nil
    if not restarted and (code ~= 0 or (signal and signal ~= 0)) then
      exited(code, signal)
    end
    local attached = state.attached
    for bufnr, id in pairs(attached) do
      if id == client_id then
        attached[bufnr] = nil
        client.pending[bufnr] = nil
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
function M.register(exact)
  local options = config.current
  local cmd = resolve_cmd(options.cmd)
  if not cmd then
    return false
  end
  options.resolved_cmd = cmd
  state.stderr, state.stderr_partial = {}, nil -- the new server's own
  lsp_config = build_lsp_config(options, cmd)
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
  local root = vim.fs.root and vim.fs.root(bufnr, config.current.root_markers) or vim.fn.getcwd()
  local start_config = vim.tbl_extend('force', lsp_config, { name = NAME, root_dir = root or vim.fn.getcwd() })
  start_config.filetypes, start_config.root_markers = nil, nil
  vim.lsp.start(start_config, { bufnr = bufnr })
end

--- Start the server for the buffers of the configured filetypes, open and to come.
function M.start()
  if vim.lsp.config and vim.lsp.enable then
    vim.lsp.enable(NAME) -- also starts it for the buffers already open
    return
  end
  local filetypes = config.current.filetypes
  api.nvim_create_autocmd('FileType', {
    group = api.nvim_create_augroup('lsp-assist.start', { clear = true }),
    pattern = filetypes,
    callback = function(ev)
      start_buffer(ev.buf)
    end,
  })
  for _, bufnr in ipairs(api.nvim_list_bufs()) do
    if api.nvim_buf_is_loaded(bufnr) and vim.bo[bufnr].buftype == ''
      and vim.tbl_contains(filetypes, vim.bo[bufnr].filetype) then
      start_buffer(bufnr)
    end
  end
end

--- Stop the running clients, then (once they are gone) register the command in
--- the options (config.current) again and start; `callback(ok)` after that.
function M.restart(callback)
  status.stop_polling()
  local old = vim.lsp.get_clients({ name = NAME })
  for _, lsp_client in ipairs(old) do
    restarting[lsp_client.id] = true
    client.call(lsp_client, 'stop')
  end
  for bufnr in pairs(state.attached) do
    client.cancel_pending(bufnr)
  end
  local waited = 0
  local function go()
    -- Start once the old ones are gone (a stopping client is never reused, but two
    -- servers would load the model at once); force them after 2 s, go on after 4 s.
    local alive = vim.tbl_filter(function(c)
      return vim.lsp.get_client_by_id(c.id) ~= nil
    end, old)
    if #alive > 0 and waited < 4000 then
      if waited == 2000 then
        for _, c in ipairs(alive) do
          client.call(c, 'stop', true)
        end
      end
      waited = waited + 50
      vim.defer_fn(go, 50)
      return
    end
    state.attached = {}
    state.cmd_error = nil
    state.status.progress = {}
    state.status.latency_ms = nil
    status.set('starting', nil)
    local ok = M.register(true)
    if ok then
      M.start()
    end
    if callback then
      callback(ok)
    end
  end
  go()
end

return M
