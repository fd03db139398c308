-- Headless Neovim script for tests/editors/test_nvim.py.
--
--   nvim --headless --clean -u tests/editors/nvim_init.lua
--
-- Environment: LSP_ASSIST_TEST_PLUGIN (editors/nvim), LSP_ASSIST_TEST_SERVER (the
-- lsp-assist executable), LSP_ASSIST_TEST_FILE, LSP_ASSIST_TEST_LINE (1-based; the
-- cursor goes to its end), LSP_ASSIST_TEST_TYPE (text typed there in insert mode),
-- LSP_ASSIST_TEST_SETTINGS (JSON), LSP_ASSIST_TEST_OUT (JSON written here),
-- LSP_ASSIST_TEST_TIMEOUT_MS, LSP_ASSIST_TEST_METHOD (the plugin's `method` option:
-- 'auto', or 'completion' for the textDocument/completion fallback).
--
-- It does what a user does: opens the file (the plugin starts and attaches the server),
-- types in insert mode (the plugin's InsertCharPre/TextChangedI autocmds send
-- textDocument/inlineCompletion after its debounce), waits for the ghost text, presses
-- <Tab> (the plugin inserts it and sends workspace/executeCommand lspAssist.accept),
-- then runs the explain and status commands, and writes what it saw as JSON.

local env = vim.env
local out_path = assert(env.LSP_ASSIST_TEST_OUT, 'LSP_ASSIST_TEST_OUT not set')
local timeout_ms = tonumber(env.LSP_ASSIST_TEST_TIMEOUT_MS or '90000')
local started = vim.uv.now()

vim.opt.runtimepath:prepend(env.LSP_ASSIST_TEST_PLUGIN)
vim.opt.swapfile = false
vim.opt.shadafile = 'NONE'

local assist = require('lsp-assist')
local settings = vim.json.decode(env.LSP_ASSIST_TEST_SETTINGS or '{}')
assist.setup({
  cmd = { env.LSP_ASSIST_TEST_SERVER or 'lsp-assist', 'serve' },
  settings = settings,
  debounce_ms = 30,
  method = env.LSP_ASSIST_TEST_METHOD or 'auto',
})

local report = {
  nvim = tostring(vim.version()),
  steps = {},
  responses = {},
  timeout = false,
}

local function step(name)
  table.insert(report.steps, { name = name, ms = vim.uv.now() - started })
end

local function finish()
  local state = assist.state
  report.setup = state.setup
  report.builtin = state.builtin
  report.clients = vim.tbl_values(state.clients)
  report.attached = next(state.attached) ~= nil
  report.requests = state.requests
  report.response_count = state.responses
  report.last_request = state.last_request
  report.last_response = state.last_response
  report.accepted = state.accepted
  report.errors = state.errors
  local buf = vim.api.nvim_get_current_buf()
  report.buffer = vim.api.nvim_buf_get_lines(buf, 0, -1, false)
  local clients = vim.lsp.get_clients({ name = 'lsp_assist' })
  report.lsp_clients = #clients
  if clients[1] then
    report.client_initialized = clients[1].initialized == true
    report.offset_encoding = clients[1].offset_encoding
  end
  local encoded = vim.json.encode(report)
  local fh = assert(io.open(out_path, 'w'))
  fh:write(encoded)
  fh:close()
  for _, client in ipairs(clients) do
    client:stop()
  end
  vim.wait(3000, function()
    return #vim.lsp.get_clients({ name = 'lsp_assist' }) == 0
  end, 50)
  vim.cmd('qa!')
end

local function expired()
  if vim.uv.now() - started > timeout_ms then
    report.timeout = true
    return true
  end
  return false
end

--- Poll `cond` every 50 ms; then `next_step()`, or finish on timeout.
local function wait_for(cond, next_step)
  local function tick()
    if cond() then
      next_step()
    elseif expired() then
      finish()
    else
      vim.defer_fn(tick, 50)
    end
  end
  tick()
end

local buf
local line = tonumber(env.LSP_ASSIST_TEST_LINE or '1')
local typed = env.LSP_ASSIST_TEST_TYPE or ''
local seen_responses = 0
local attempts = 0

local function run_commands()
  step('commands')
  local pending = 2
  assist.explain(function(err, result)
    report.explain = {
      err = err,
      has_text = type(result) == 'table' and type(result.text) == 'string',
      keys = type(result) == 'table' and vim.tbl_keys(result) or nil,
    }
    pending = pending - 1
  end)
  assist.status(function(err, result)
    report.status = { err = err, result = result }
    pending = pending - 1
  end)
  wait_for(function()
    return pending == 0
  end, function()
    step('done')
    finish()
  end)
end

local function after_accept()
  step('accepted')
  report.accept_line = vim.api.nvim_buf_get_lines(buf, line - 1, line, false)[1]
  report.mode_after_accept = vim.api.nvim_get_mode().mode
  wait_for(function()
    local record = assist.state.accepted[1]
    return record ~= nil and (record.response ~= nil or record.command == nil)
  end, function()
    vim.cmd('stopinsert')
    run_commands()
  end)
end

local function on_response()
  local response = assist.state.last_response
  table.insert(report.responses, {
    method = response.method,
    err = response.err,
    items = #response.items,
    stale = response.stale,
    ms = vim.uv.now() - started,
  })
  if assist.state.ghost then
    step('ghost')
    report.ghost_text = assist.state.ghost.text
    report.ghost_extmarks = #vim.api.nvim_buf_get_extmarks(buf, -1, 0, -1, { details = false })
    -- Press <Tab> as a user would: the plugin's insert-mode mapping accepts.
    vim.api.nvim_feedkeys(vim.api.nvim_replace_termcodes('<Tab>', true, false, true), 'm', false)
    wait_for(function()
      return #assist.state.accepted > 0
    end, after_accept)
    return
  end
  -- No ghost (empty answer, or the model was still loading): ask again, explicitly.
  attempts = attempts + 1
  if attempts > 20 or response.err then
    vim.cmd('stopinsert')
    run_commands()
    return
  end
  vim.defer_fn(function()
    assist.request(buf, true)
    wait_for(function()
      return assist.state.responses > seen_responses
    end, function()
      seen_responses = assist.state.responses
      on_response()
    end)
  end, 500)
end

local function type_text()
  step('attached')
  vim.api.nvim_win_set_cursor(0, { line, 0 })
  -- 'A' enters insert mode at the end of the line; the typed characters then fire
  -- InsertCharPre and TextChangedI like real typing. 'n': no remapping of these keys.
  vim.api.nvim_feedkeys('A' .. typed, 'n', false)
  wait_for(function()
    return assist.state.responses > 0
  end, function()
    step('first response')
    report.typed_request = assist.state.requests > 0
    seen_responses = assist.state.responses
    on_response()
  end)
end

vim.schedule(function()
  vim.cmd.edit(vim.fn.fnameescape(env.LSP_ASSIST_TEST_FILE))
  buf = vim.api.nvim_get_current_buf()
  step('opened')
  wait_for(function()
    return assist.state.attached[buf] ~= nil
  end, type_text)
end)
