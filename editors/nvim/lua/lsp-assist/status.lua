-- The plugin's status: starting, loading, ready, error (and, derived, thinking and off),
-- from lspAssist.status polls, $/progress and the server's exit; the statusline
-- component; the server's last stderr lines, shown in the error state.

local M = {}

local api = vim.api
local uv = vim.uv or vim.loop
local client = require('lsp-assist.client')
local config = require('lsp-assist.config')
local state = require('lsp-assist.state')

M.RESTART_HINT = ':LspAssistRestart'
local STDERR_LINES = 10

--- Tell the statusline and the User LspAssistStatus autocmds.
function M.changed()
  vim.schedule(function()
    pcall(api.nvim_exec_autocmds, 'User', { pattern = 'LspAssistStatus', modeline = false })
    pcall(vim.cmd, 'redrawstatus')
  end)
end

function M.set(name, message)
  local status = state.status
  if status.state ~= name or status.message ~= message then
    local was = status.state
    status.state, status.message = name, message
    M.changed()
    if name == 'ready' and was ~= 'ready' then
      -- The model came: where is the cursor?
      require('lsp-assist.request').schedule_cursor_report(api.nvim_get_current_buf())
    end
  end
end

--- Read an lspAssist.status result: ready, loading, or the model's error.
function M.apply(result)
  if type(result) ~= 'table' then
    return
  end
  state.status.server = result
  local model = type(result.model) == 'table' and result.model or {}
  local model_error = model.error
  if model_error ~= nil and model_error ~= vim.NIL and model_error ~= '' then
    M.set('error', tostring(model_error))
  elseif result.ready == true or (result.ready == nil and result.initialized == true) then
    M.set('ready', nil)
  elseif result.initialized == false or result.ready == false then
    M.set('loading', nil)
  end
end

local poll_timer

function M.stop_polling()
  if poll_timer then
    poll_timer:stop()
    poll_timer:close()
    poll_timer = nil
  end
end

--- Ask lspAssist.status now, then every status_poll_ms until ready or error.
function M.poll()
  local any = client.any()
  local options = config.current
  if not any or options.status_poll_ms <= 0 then
    return
  end
  client.request(any, 'workspace/executeCommand', { command = 'lspAssist.status', arguments = {} },
    function(err, result)
      if err then
        return
      end
      M.apply(result)
      local now = state.status.state
      if (now == 'loading' or now == 'starting') and not poll_timer then
        poll_timer = uv.new_timer()
        poll_timer:start(options.status_poll_ms, 0, vim.schedule_wrap(function()
          M.stop_polling()
          M.poll()
        end))
      end
    end, nil)
end

--- $/progress from the server (LspProgress): model loading, indexing.
function M.on_progress(params)
  if type(params) ~= 'table' or params.value == nil then
    return
  end
  local value = params.value
  local token = tostring(params.token)
  local progress = state.status.progress
  if value.kind == 'end' then
    progress[token] = nil
    M.poll() -- a load that ended: ready, or failed
  else
    local entry = progress[token] or {}
    entry.title = value.title or entry.title
    entry.message = value.message or entry.message
    entry.percentage = value.percentage or entry.percentage
    progress[token] = entry
    local title = (entry.title or '') .. ' ' .. token
    if value.kind == 'begin' and title:lower():find('model') then
      M.set('loading', nil)
    end
  end
  M.changed()
end

local function progress_text(progress)
  local parts = {}
  for _, entry in pairs(progress) do
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

--- Keep the last lines of the server's stderr. Neovim writes a server's stderr only to
--- the LSP log (`vim.lsp.log.error('rpc', cmd, 'stderr', chunk)`), so the plugin wraps
--- that function once and keeps the chunks of its own command (the log still gets them).
function M.capture_stderr()
  local ok, log = pcall(require, 'vim.lsp.log')
  if not ok or type(log) ~= 'table' or type(log.error) ~= 'function' or log._lsp_assist then
    return
  end
  local original = log.error
  log._lsp_assist = true
  log.error = function(...)
    local where, cmd, kind, chunk = ...
    local resolved = config.current.resolved_cmd
    local ours = resolved and resolved[1]
    if type(cmd) == 'table' then
      cmd = cmd[1] -- Neovim 0.10 logs the whole command
    end
    if where == 'rpc' and kind == 'stderr' and type(chunk) == 'string' and ours and cmd == ours then
      local lines = state.stderr
      local parts = vim.split((state.stderr_partial or '') .. chunk, '\n', { plain = true })
      state.stderr_partial = table.remove(parts)
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
function M.stderr_tail()
  local lines = vim.list_extend({}, state.stderr)
  local partial = vim.trim(state.stderr_partial or '')
  if partial ~= '' then
    table.insert(lines, partial)
  end
  return lines
end

--- The warning for a command that found no server: in the error state, why and how to
--- start it again.
function M.no_server(text)
  local status = state.status
  if status.state == 'error' and status.message then
    local hint = status.message:find(M.RESTART_HINT, 1, true) and ''
      or ('; ' .. M.RESTART_HINT .. ' starts it again')
    text = ('%s: %s%s'):format(text, status.message, hint)
    local said = state.stderr[#state.stderr]
    if said then
      text = ('%s (its stderr: %s)'):format(text, said)
    end
  end
  vim.notify('lsp-assist: ' .. text, vim.log.levels.WARN)
end

--- The plugin's state for the current buffer: off, starting, loading, ready, thinking, error.
function M.info(bufnr)
  bufnr = (bufnr == nil or bufnr == 0) and api.nvim_get_current_buf() or bufnr
  local status = state.status
  local shown = status.state
  if not state.setup or not config.enabled(bufnr) then
    shown = 'off'
  elseif client.pending[bufnr] and shown == 'ready' then
    shown = 'thinking'
  end
  local ghost = state.ghost
  return {
    state = shown,
    message = status.message,
    latency_ms = status.latency_ms,
    progress = progress_text(status.progress),
    attached = state.attached[bufnr] ~= nil,
    stderr = shown == 'error' and M.stderr_tail() or nil,
    item = ghost and ghost.bufnr == bufnr and ghost.count > 1 and { ghost.index, ghost.count } or nil,
  }
end

--- Statusline component: "lsp-assist: ready 120 ms", "lsp-assist: loading", ...
--- Empty in buffers the server is not attached to.
function M.line()
  local info = M.info(0)
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

return M
