-- :checkhealth lsp-assist: the server executable, a server that starts and answers
-- `initialize`, the running client's status, and `lsp-assist doctor`'s report.

local M = {}

local health = vim.health
local config = require('lsp-assist.config')
local server = require('lsp-assist.server')
local state = require('lsp-assist.state')
local status = require('lsp-assist.status')

--- Frame an LSP message (Content-Length header + JSON body).
local function frame(message)
  local body = vim.json.encode(message)
  return ('Content-Length: %d\r\n\r\n%s'):format(#body, body)
end

--- The server command setup() resolved, else the one it would resolve.
local function server_cmd()
  local cmd = config.current.resolved_cmd or config.current.cmd
  if cmd == nil then
    if vim.fn.executable('lsp-assist') == 1 then
      return { 'lsp-assist', 'serve' }
    end
    return { server.venv_server() or 'lsp-assist', 'serve' }
  end
  return cmd
end

--- Start the server, send initialize, shutdown and exit; true when it answered with
--- its capabilities. No workspace folder is sent, so nothing is indexed and the model
--- is not loaded (that starts at `initialized`).
local function handshake(cmd, timeout_ms)
  local input = frame({
    jsonrpc = '2.0',
    id = 1,
    method = 'initialize',
    params = { processId = vim.NIL, rootUri = vim.NIL, capabilities = vim.empty_dict() },
  }) .. frame({ jsonrpc = '2.0', id = 2, method = 'shutdown' })
    .. frame({ jsonrpc = '2.0', method = 'exit' })
  local ok, proc = pcall(vim.system, cmd, { stdin = input, text = true })
  if not ok then
    return false, tostring(proc)
  end
  local result = proc:wait(timeout_ms)
  local out = result.stdout or ''
  if out:find('"inlineCompletionProvider"', 1, true) then
    return true, nil
  end
  if result.signal and result.signal ~= 0 then
    return false, ('no answer within %d ms (signal %d)'):format(timeout_ms, result.signal)
  end
  local err = vim.trim(result.stderr or '')
  return false, ('exit code %s; %s'):format(result.code, err:sub(-400))
end

function M.check()
  health.start('lsp-assist: setup')
  if not state.setup then
    health.warn("require('lsp-assist').setup() was not called", {
      "call require('lsp-assist').setup({}) in your init.lua",
    })
  else
    health.ok('setup() called')
  end
  if state.cmd_error then
    health.error(state.cmd_error)
  end
  local cmd = server_cmd()
  if type(cmd) ~= 'table' or type(cmd[1]) ~= 'string' then
    health.info('the server command is a function (an in-process server): nothing to check')
    return
  end
  local exe = cmd[1]
  if vim.fn.executable(exe) ~= 1 then
    local venv = server.venv_server()
    health.error(("server executable '%s' not found"):format(exe), {
      venv and ("use cmd = { '%s', 'serve' } or put its folder on PATH"):format(venv)
        or 'run `make` in the lsp-assist repository, then use <repo>/.venv/bin/lsp-assist',
    })
    return
  end
  health.ok(('server executable: %s'):format(vim.fn.exepath(exe)))

  health.start('lsp-assist: server')
  local started, detail = handshake(cmd, 30000)
  if started then
    health.ok(('`%s` starts and answers initialize'):format(table.concat(cmd, ' ')))
  else
    health.error(('`%s` did not answer initialize: %s'):format(table.concat(cmd, ' '), detail))
  end
  local client = vim.lsp.get_clients({ name = 'lsp_assist' })[1]
  local now = state.status
  if not client and now.state == 'error' then
    local said = status.stderr_tail()
    health.error(('the server: %s'):format(now.message or 'error'),
      #said > 0 and vim.list_extend({ 'the last it wrote on stderr:' }, said) or nil)
  elseif not client then
    health.info('no lsp-assist client is running (open a file of a configured filetype)')
  else
    local response = client:request_sync('workspace/executeCommand',
      { command = 'lspAssist.status', arguments = {} }, 5000)
    local result = response and response.result
    if type(result) ~= 'table' then
      health.warn('the running server did not answer lspAssist.status: '
        .. vim.inspect(response and response.err or 'timeout'))
    else
      local model = type(result.model) == 'table' and result.model or {}
      if type(model.error) == 'string' and model.error ~= '' then
        health.error('model: ' .. model.error)
      elseif result.ready then
        health.ok(('running, model loaded: %s'):format(tostring(model.path)))
      else
        health.info('running, the model is still loading')
      end
    end
  end

  health.start('lsp-assist: doctor')
  -- The same command with `doctor` in place of `serve` (and its flags).
  local doctor = { exe, 'doctor' }
  for i = 2, #cmd do
    if cmd[i] == 'serve' then
      doctor = vim.list_extend(vim.list_slice(cmd, 1, i - 1), { 'doctor' })
      break
    end
  end
  local model = (config.current.settings or {}).modelPath
  if type(model) == 'string' and model ~= '' then
    vim.list_extend(doctor, { '--model', model })
  end
  local ok, proc = pcall(vim.system, doctor, { text = true })
  if not ok then
    health.error('could not run doctor: ' .. tostring(proc))
    return
  end
  -- doctor loads the model and runs one prompt: 53 s on a 2-core CPU at load 9 (the
  -- 60 s wait this replaced timed out there), so the wait is generous and says so.
  local result = proc:wait(180000)
  -- a wait that times out kills the process and reports code 124 (and the signal)
  if result.code == 124 or (result.signal and result.signal ~= 0) then
    health.error('`lsp-assist doctor` gave no report within 180 s', {
      'run `lsp-assist doctor` in a shell to see where it stops',
    })
    return
  end
  local report = vim.trim((result.stdout or '') .. '\n' .. (result.stderr or ''))
  if report ~= '' then
    health.info(report)
  end
  if result.code == 0 then
    health.ok('`lsp-assist doctor` found nothing broken')
  else
    health.error(('`lsp-assist doctor` exited with %s'):format(result.code), {
      'read its report above (llama.cpp build, model)',
    })
  end
end

return M
